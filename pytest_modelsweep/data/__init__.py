"""The data sets the built-in benchmarks read: their record types and loaders. Pure."""
