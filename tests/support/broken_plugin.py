"""A tool plugin with a bug: importing it raises (not an ImportError). Used to show that a reload
that fails for any reason is reported and keeps the last good config."""

raise RuntimeError("plugin bug: the module cannot be imported")
