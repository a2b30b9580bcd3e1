"""File name endings -> the tree-sitter grammar (tree-sitter-language-pack's name) that reads
them: the syntax check of every proposal (parses.py) and, for the languages it has tag
queries for, the repository map (app/core/knowledge/queries.py). Markdown, HTML and SQL are
left out: their grammars accept nearly anything, or only one dialect."""

from __future__ import annotations

GRAMMARS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala", ".swift": "swift", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".cs": "csharp",
    ".rb": "ruby", ".php": "php", ".lua": "lua", ".ex": "elixir", ".exs": "elixir",
    ".hs": "haskell", ".zig": "zig", ".sh": "bash", ".bash": "bash",
    ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".css": "css",
}
