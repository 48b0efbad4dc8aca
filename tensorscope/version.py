"""tensorscope's version, in a module of its own: the package's ``__init__`` imports the API, so a
module that needs the version and imports it from the package would close an import cycle."""

__version__ = "0.1.0"
