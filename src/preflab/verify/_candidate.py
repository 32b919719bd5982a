"""The candidate's side of a function-level task: runs in the candidate's own sandbox, imports
the solution and answers calls. Standalone (imports nothing of preflab).

argv: WIRE_PY SOLUTION_DIR MODULE     fd 3: requests from the judge     fd 4: replies to it

Nothing here is trusted: the candidate's code runs in this process and may rewrite every line
of it. What it cannot do is reach the judge other than by the frames it writes to fd 4, which
the judge decodes into exact built-in values (see ``_wire.py``); the tests, the expected values
and the judge's process are outside this sandbox altogether.
"""

import importlib
import importlib.util
import os
import sys
import types

REQUESTS, REPLIES = 3, 4


def _load_wire(path):
    spec = importlib.util.spec_from_file_location("_preflab_wire", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _error(exc):
    names = [k.__name__ for k in type(exc).__mro__ if k.__module__ == "builtins"]
    try:
        message = str(exc)[:2000]
    except Exception:  # a __str__ that raises
        message = ""
    return {"raise": {"types": names[:8], "message": message}}


def _is_function(value):
    """Anything callable but a class (``lru_cache`` wrappers, partials, bound methods): its
    state, if any, stays in this process; only arguments and results cross."""
    return callable(value) and not isinstance(value, type)


def _hello(wire, module):
    functions, classes, values = [], [], {}
    for name, value in list(vars(module).items()):
        if name.startswith("__"):
            continue
        if isinstance(value, type):
            classes.append(name)
        elif _is_function(value):
            functions.append(name)
        elif not isinstance(value, types.ModuleType):
            try:
                values[name] = wire.encode(value)
            except wire.Refused:
                continue
    return {"ok": {"functions": functions, "classes": classes, "values": values}}


MUTABLE = (list, dict, set)


def _call(wire, module, message):
    function = getattr(module, message.get("name", ""), None)
    if not _is_function(function):
        return {"refused": f"{message.get('name')!r} is not a function of the solution"}
    args = wire.decode(message.get("args", []))
    kwargs = wire.decode(message.get("kwargs", {"d": []}))
    if type(args) is not list or type(kwargs) is not dict:
        return {"refused": "malformed call"}
    before = {
        k: wire.encode(v) for k, v in [*enumerate(args), *kwargs.items()] if type(v) in MUTABLE
    }
    try:
        result = function(*args, **kwargs)
    except BaseException as exc:  # SystemExit included: the judge decides what it means
        return _error(exc)
    try:
        reply = {"ok": wire.encode(result)}
        after = []
        for key, old in before.items():
            value = args[key] if type(key) is int else kwargs[key]
            new = wire.encode(value)
            if new != old:
                after.append([key, new])
        reply["after"] = after
    except wire.Refused as e:
        return {"refused": f"{message.get('name')}() returned {e}"}
    return reply


def main():
    wire = _load_wire(sys.argv[1])
    solution_dir, name = sys.argv[2], sys.argv[3]
    os.chdir(solution_dir)
    sys.path.insert(0, solution_dir)
    module = None
    while True:
        try:
            message = wire.receive(REQUESTS)
        except EOFError:
            break
        op = message.get("op")
        if op == "hello":
            try:
                module = importlib.import_module(name)
                reply = _hello(wire, module)
            except BaseException as exc:
                reply = _error(exc)
        elif op == "call" and module is not None:
            try:
                reply = _call(wire, module, message)
            except (wire.Refused, RecursionError, MemoryError) as e:
                reply = {"refused": f"{type(e).__name__}: {e}"}
        else:
            reply = {"refused": f"unknown request {op!r}"}
        sys.stdout.flush()
        wire.send(REPLIES, reply)


if __name__ == "__main__":
    main()
