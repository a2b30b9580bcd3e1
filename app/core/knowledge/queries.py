"""Tag queries: which nodes of a tree-sitter tree are definitions and which are references.

Written for steer rather than taken from a tagging library, so that each capture says exactly
what the map uses: `@def.<kind>` on the *name* of a definition (its line is the one the map
shows), `@ref` on a name used elsewhere (a call, an attribute, a type, an import, a base
class). Names only: the map ranks files by who uses what, it does not resolve scopes.
Languages without a query here fall back to Pygments tokens (tags.py).

Each query is compiled against the grammar of tree-sitter-language-pack in the test suite, so
a grammar update that renames a node fails there, not at a user's first build.
"""

from __future__ import annotations

PYTHON = """
(class_definition name: (identifier) @def.class)
(function_definition name: (identifier) @def.function)
(call function: (identifier) @ref)
(attribute attribute: (identifier) @ref)
(type (identifier) @ref)
(decorator (identifier) @ref)
(argument_list (identifier) @ref)
(import_from_statement name: (dotted_name (identifier) @ref))
(import_from_statement name: (aliased_import name: (dotted_name (identifier) @ref)))
(import_from_statement module_name: (dotted_name (identifier) @ref))
(import_statement name: (dotted_name (identifier) @ref))
"""

JAVASCRIPT = """
(class_declaration name: (_) @def.class)
(function_declaration name: (identifier) @def.function)
(generator_function_declaration name: (identifier) @def.function)
(method_definition name: (property_identifier) @def.method)
(variable_declarator name: (identifier) @def.function value: [(arrow_function) (function_expression)])
(call_expression function: (identifier) @ref)
(call_expression function: (member_expression property: (property_identifier) @ref))
(new_expression constructor: (identifier) @ref)
(class_heritage (identifier) @ref)
(import_specifier name: (identifier) @ref)
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
(call_expression function: (identifier) @ref)
(call_expression function: (member_expression property: (property_identifier) @ref))
(new_expression constructor: (identifier) @ref)
(type_identifier) @ref
(import_specifier name: (identifier) @ref)
"""

GO = """
(function_declaration name: (identifier) @def.function)
(method_declaration name: (field_identifier) @def.method)
(type_spec name: (type_identifier) @def.type)
(call_expression function: (identifier) @ref)
(call_expression function: (selector_expression field: (field_identifier) @ref))
(type_identifier) @ref
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
(call_expression function: (identifier) @ref)
(call_expression function: (field_expression field: (field_identifier) @ref))
(call_expression function: (scoped_identifier name: (identifier) @ref))
(macro_invocation macro: (identifier) @ref)
(type_identifier) @ref
"""

JAVA = """
(class_declaration name: (identifier) @def.class)
(interface_declaration name: (identifier) @def.interface)
(enum_declaration name: (identifier) @def.enum)
(record_declaration name: (identifier) @def.class)
(method_declaration name: (identifier) @def.method)
(constructor_declaration name: (identifier) @def.method)
(method_invocation name: (identifier) @ref)
(object_creation_expression type: (type_identifier) @ref)
(type_identifier) @ref
"""

C = """
(function_definition declarator: (function_declarator declarator: (identifier) @def.function))
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @def.function)))
(struct_specifier name: (type_identifier) @def.struct body: (_))
(union_specifier name: (type_identifier) @def.struct body: (_))
(enum_specifier name: (type_identifier) @def.enum body: (_))
(type_definition declarator: (type_identifier) @def.type)
(preproc_function_def name: (identifier) @def.macro)
(call_expression function: (identifier) @ref)
(type_identifier) @ref
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
(call_expression function: (identifier) @ref)
(call_expression function: (field_expression field: (field_identifier) @ref))
(call_expression function: (qualified_identifier name: (identifier) @ref))
(type_identifier) @ref
"""

CSHARP = """
(class_declaration name: (identifier) @def.class)
(struct_declaration name: (identifier) @def.struct)
(interface_declaration name: (identifier) @def.interface)
(enum_declaration name: (identifier) @def.enum)
(record_declaration name: (identifier) @def.class)
(method_declaration name: (identifier) @def.method)
(constructor_declaration name: (identifier) @def.method)
(invocation_expression function: (identifier) @ref)
(invocation_expression function: (member_access_expression name: (identifier) @ref))
(object_creation_expression type: (identifier) @ref)
(base_list (identifier) @ref)
"""

RUBY = """
(class name: (constant) @def.class)
(module name: (constant) @def.module)
(method name: (_) @def.method)
(singleton_method name: (_) @def.method)
(call method: (identifier) @ref)
(superclass (constant) @ref)
(scope_resolution name: (constant) @ref)
"""

PHP = """
(class_declaration name: (name) @def.class)
(interface_declaration name: (name) @def.interface)
(trait_declaration name: (name) @def.trait)
(function_definition name: (name) @def.function)
(method_declaration name: (name) @def.method)
(function_call_expression function: (name) @ref)
(member_call_expression name: (name) @ref)
(scoped_call_expression name: (name) @ref)
(object_creation_expression (name) @ref)
(base_clause (name) @ref)
"""

# tree-sitter-language-pack's name for a grammar -> its query
QUERIES: dict[str, str] = {
    "python": PYTHON, "javascript": JAVASCRIPT, "typescript": TYPESCRIPT, "tsx": TYPESCRIPT,
    "go": GO, "rust": RUST, "java": JAVA, "c": C, "cpp": CPP, "csharp": CSHARP, "ruby": RUBY,
    "php": PHP,
}

# file name endings -> grammar name, for the languages above
EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".jsx": "javascript",
    ".mjs": "javascript", ".cjs": "javascript", ".ts": "typescript", ".mts": "typescript",
    ".cts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".hh": "cpp", ".hxx": "cpp", ".cs": "csharp", ".rb": "ruby", ".php": "php",
}
