"""What the code is: languages, tree-sitter regions, definitions, and what an instruction asks."""
