"""Built-in tools. The loader scans every public module of this package for tools,
so only tools live here; shared machinery lives elsewhere in toolbridge."""
