from bnpmix.pipeline.cli import entry

entry()
