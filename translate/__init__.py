"""Translation of instructions and function descriptions (backends, store, checks).

Not implemented yet: see the translation issue. Nothing here translates.
"""
