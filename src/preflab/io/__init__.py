"""Import and export: record formats, the streaming importer, exporters, manifests and cards."""
