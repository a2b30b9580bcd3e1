"""Tag queries: which nodes of a tree-sitter tree are definitions and which are references.

Written for steer rather than taken from a tagging library, so that each capture says exactly
what the map uses: `@def.<kind>` on the *name* of a definition (its line is the one the map
class). Names only: the map ranks files by who uses what, it does not resolve scopes.
Languages without a query here fall back to Pygments tokens (tags.py).

Each query is compiled against the grammar of tree-sitter-language-pack in the test suite, so
a grammar update that renames a node fails there, not at a user's first build.
"""

from __future__ import annotations

from app.core.text.grammars import GRAMMARS

PYTHON = """
(class_definition name: (identifier) @def.class)
(function_definition name: (identifier) @def.function)
"""

JAVASCRIPT = """
(class_declaration name: (_) @def.class)
(function_declaration name: (identifier) @def.function)
(generator_function_declaration name: (identifier) @def.function)
(method_definition name: (property_identifier) @def.method)
(variable_declarator name: (identifier) @def.function value: [(arrow_function) (function_expression)])
"""

TYPESCRIPT = """
(class_declaration name: (type_identifier) @def.class)
(abstract_class_declaration name: (type_identifier) @def.class)
(interface_declaration name: (type_identifier) @def.interface)
(type_alias_declaration name: (type_identifier) @def.type)
(enum_declaration name: (identifier) @def.enum)
(function_declaration name: (identifier) @def.function)
(generator_function_declaration name: (identifier) @def.function)
(function_signature name: (identifier) @def.function)
(method_definition name: (property_identifier) @def.method)
(method_signature name: (property_identifier) @def.method)
(abstract_method_signature name: (property_identifier) @def.method)
(module name: (identifier) @def.module)
(variable_declarator name: (identifier) @def.function value: [(arrow_function) (function_expression)])
"""

GO = """
(function_declaration name: (identifier) @def.function)
(method_declaration name: (field_identifier) @def.method)
(type_spec name: (type_identifier) @def.type)
"""

RUST = """
(function_item name: (identifier) @def.function)
(function_signature_item name: (identifier) @def.function)
(struct_item name: (type_identifier) @def.struct)
(enum_item name: (type_identifier) @def.enum)
(union_item name: (type_identifier) @def.struct)
(trait_item name: (type_identifier) @def.trait)
(type_item name: (type_identifier) @def.type)
(mod_item name: (identifier) @def.module)
(macro_definition name: (identifier) @def.macro)
"""

JAVA = """
(class_declaration name: (identifier) @def.class)
(interface_declaration name: (identifier) @def.interface)
(enum_declaration name: (identifier) @def.enum)
(record_declaration name: (identifier) @def.class)
(method_declaration name: (identifier) @def.method)
(constructor_declaration name: (identifier) @def.method)
"""

C = """
(function_definition declarator: (function_declarator declarator: (identifier) @def.function))
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @def.function)))
(struct_specifier name: (type_identifier) @def.struct body: (_))
(union_specifier name: (type_identifier) @def.struct body: (_))
(enum_specifier name: (type_identifier) @def.enum body: (_))
(type_definition declarator: (type_identifier) @def.type)
(preproc_function_def name: (identifier) @def.macro)
"""

CPP = """
(function_definition declarator: (function_declarator declarator: (identifier) @def.function))
(function_definition declarator: (function_declarator declarator: (field_identifier) @def.method))
(function_definition declarator: (function_declarator declarator: (qualified_identifier name: (identifier) @def.method)))
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @def.function)))
(function_definition declarator: (reference_declarator (function_declarator declarator: (identifier) @def.function)))
(class_specifier name: (type_identifier) @def.class body: (_))
(struct_specifier name: (type_identifier) @def.struct body: (_))
(enum_specifier name: (type_identifier) @def.enum body: (_))
(type_definition declarator: (type_identifier) @def.type)
(alias_declaration name: (type_identifier) @def.type)
(namespace_definition name: (namespace_identifier) @def.module)
(preproc_function_def name: (identifier) @def.macro)
"""

CSHARP = """
(class_declaration name: (identifier) @def.class)
(struct_declaration name: (identifier) @def.struct)
(interface_declaration name: (identifier) @def.interface)
(enum_declaration name: (identifier) @def.enum)
(record_declaration name: (identifier) @def.class)
(method_declaration name: (identifier) @def.method)
(constructor_declaration name: (identifier) @def.method)
"""

RUBY = """
(class name: (constant) @def.class)
(module name: (constant) @def.module)
(method name: (_) @def.method)
(singleton_method name: (_) @def.method)
"""

PHP = """
(class_declaration name: (name) @def.class)
(interface_declaration name: (name) @def.interface)
(trait_declaration name: (name) @def.trait)
(function_definition name: (name) @def.function)
(method_declaration name: (name) @def.method)
"""

# tree-sitter-language-pack's name for a grammar -> its query
QUERIES: dict[str, str] = {
    "python": PYTHON, "javascript": JAVASCRIPT, "typescript": TYPESCRIPT, "tsx": TYPESCRIPT,
    "go": GO, "rust": RUST, "java": JAVA, "c": C, "cpp": CPP, "csharp": CSHARP, "ruby": RUBY,
    "php": PHP,
}

# deepest node a definition match may start at (the root is 0): Python's decorated method in a
# nested class is module > class > block > class > block > decorated > function = 6
DEPTH: dict[str, int] = {"python": 6, "javascript": 6, "typescript": 6, "tsx": 6, "go": 3,
                         "rust": 6, "java": 6, "c": 6, "cpp": 8, "csharp": 8, "ruby": 6, "php": 6}

# file name endings -> grammar name, for the languages above
EXTENSIONS: dict[str, str] = {e: g for e, g in GRAMMARS.items() if g in QUERIES}
