"""Text as steer reads it: files decoded with their format kept, line diffs, locating
a block in a file, and the characters a terminal would obey or a reader cannot see."""
