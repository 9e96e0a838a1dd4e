# Imports every core distribution's top-level module(s) in the configured interpreter and prints
# one JSON line (bot.verify.prosecutor.check_imports). Markers are evaluated with pip's vendored
# `packaging` when it is there. Standard library only: it runs on the analysed repository's interpreter.
import importlib
import importlib.metadata as md
import json
import re
import sys
import traceback

req = json.loads(sys.argv[1])
try:
    from packaging.markers import Marker
except Exception:
    try:
        from pip._vendor.packaging.markers import Marker
    except Exception:
        Marker = None
norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
by_dist = {}
try:
    for mod, dists in md.packages_distributions().items():
        for d in dists:
            by_dist.setdefault(norm(d), set()).add(mod)
except Exception:
    pass
def try_import(mod):
    try:
        importlib.import_module(mod)
        return True, ""
    except BaseException as e:
        return False, "".join(traceback.format_exception_only(type(e), e)).strip()[-600:]
out = []
for name, marker in req["dists"]:
    if marker and Marker is not None:
        try:
            if not Marker(marker).evaluate():
                continue
        except Exception:
            pass
    mods = sorted(m for m in by_dist.get(norm(name), ()) if m.isidentifier() and not m.startswith("_"))
    if not mods:
        try:
            md.distribution(name)
            out.append({"dist": name, "module": None, "ok": True, "error": "installed, no top-level module"})
        except md.PackageNotFoundError:
            out.append({"dist": name, "module": None, "ok": False, "error": "distribution %s is not installed" % name})
        continue
    primary = [m for m in mods if norm(m) == norm(name) or norm(m) == norm(name).split("-")[-1]]
    for mod in (primary or mods)[:2]:
        ok, err = try_import(mod)
        out.append({"dist": name, "module": mod, "ok": ok, "error": err})
for mod in req["modules"]:
    ok, err = try_import(mod)
    out.append({"dist": None, "module": mod, "ok": ok, "error": err})
print("SETUPBOT-IMPORTS " + json.dumps(out))
