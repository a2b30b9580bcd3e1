"""What steer knows of the repository: a ranked map of its files and definitions, kept ready
in the background (builder.py), and the read-only look-ups a model makes itself (lookup.py).
"""
