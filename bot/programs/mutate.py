# Prepends a raise to the module's file, found the way the tests would import it (sys.path of
# the configured interpreter, from the working directory). Prints the path it changed.
# argv: MODULE MARKER (bot.verify.mutation.mutation_check). Runs in a throwaway container only.
import importlib.util
import sys

sys.path.insert(0, "")
spec = importlib.util.find_spec(sys.argv[1])
if spec is None or not spec.origin or not spec.origin.endswith(".py"):
    print("SETUPBOT-MUTATION none"); raise SystemExit(3)
text = open(spec.origin, encoding="utf-8", errors="replace").read()
lines = text.splitlines(True)
# keep a leading `from __future__` block and the docstring valid: insert after them
cut = 0
for i, line in enumerate(lines):
    s = line.strip()
    if s.startswith("from __future__"):
        cut = i + 1
with open(spec.origin, "w", encoding="utf-8") as fh:
    fh.write("".join(lines[:cut]) + "raise ImportError(%r)\n" % sys.argv[2] + "".join(lines[cut:]))
print("SETUPBOT-MUTATION " + spec.origin)
