"""The ``bnpmix`` commands: the parser (``parser``: the commands and their help; ``arguments``:
each command's arguments; ``argtypes``: their value types) and the handlers, grouped by what
they do (``ingest``, ``inspecting``: info, show, evaluate; ``fitting``: fit, resume, schedule
run; ``tuning``, ``planning``, ``demo``). ``pipeline/cli.py`` is the entry point and the exit
codes."""
