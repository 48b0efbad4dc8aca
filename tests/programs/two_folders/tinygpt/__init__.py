"""A model package beside the project folder, imported through sys.path (minGPT's layout)."""
