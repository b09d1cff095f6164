from headrace.cli import entry_point

entry_point()
