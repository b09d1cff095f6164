"""Framework plugins, at DALI's import paths (`headrace.plugin.pytorch` as `nvidia.dali.plugin.pytorch`)."""
