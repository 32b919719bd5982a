"""The static screen for repo-level code tasks: what a patch must not need to touch.

In a repo-level task (``CodeTask.mode == "repo"``) the tests import the candidate's code into the
process that runs them, so the candidate could reach the runner from inside: walk stack frames to
its locals, find it through ``gc``, trace the tests into no-ops, poke memory with ``ctypes``,
swap a function's ``__code__``, import pytest's internals, write to the interpreter's paths,
write to the result pipe. A legitimate patch to a library almost never needs any of that, so the
screen reads every Python file the candidate supplies (parsed from its bytes, so a coding cookie
means here what it means to the interpreter) and reports each use, by rule; a run with findings
scores 0 before anything executes. A task that legitimately needs a rule lists it in
``screen_allow`` (``preflab verify run --screen-allow RULE`` for a whole run).

The screen is a filter, not a proof: code that builds its own bytecode at run time is caught
only as far as its entry points (``exec``, ``eval``, ``compile``, ``__import__``, ``getattr``
with a computed name on a module) are. That is the trust limit ``docs/verify.md`` states, and why
function-level tasks never share a process with their judge at all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

#: rule -> what it stands for (``screen_allow`` takes these names)
RULES: dict[str, str] = {
    "frames": "stack-frame access (sys._getframe, inspect frames, f_back/f_locals/tb_frame)",
    "gc": "the garbage collector's object graph (gc)",
    "tracing": "tracing and profiling hooks (sys.settrace/setprofile, sys.monitoring, audit hooks)",
    "ctypes": "raw memory access (ctypes, cffi, mmap of the process)",
    "code_objects": "rewriting functions and classes (__code__, __globals__, __closure__, "
    "__subclasses__, types.CodeType/FunctionType)",
    "runner_internals": "the test runner's internals (_pytest, pluggy, pytest hooks, conftest)",
    "module_table": "the import system and builtins (sys.modules, meta_path, path_hooks, builtins)",
    "interpreter_paths": "the interpreter's files (site-packages, .pth, sitecustomize, sys.prefix)",
    "dynamic_code": "code built at run time (exec, eval, compile, __import__, computed getattr "
    "on a module, marshal)",
    "result_channel": "raw file descriptors, /proc and process replacement (os.write/dup2/"
    "fdopen/exec*, /dev/fd, /proc)",
    "lying_values": "values built to compare equal to anything (a built-in type's subclass "
    "redefining comparison, an __eq__ that returns True, __class__ spoofing, mock.ANY)",
}
_VALUE_TYPES = {
    "int",
    "float",
    "complex",
    "str",
    "bytes",
    "bool",
    "list",
    "tuple",
    "dict",
    "set",
    "frozenset",
}
_COMPARISONS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__"}

_MODULE_RULES = {
    "gc": "gc",
    "ctypes": "ctypes",
    "_ctypes": "ctypes",
    "cffi": "ctypes",
    "_pytest": "runner_internals",
    "pluggy": "runner_internals",
    "builtins": "module_table",
    "__builtin__": "module_table",
    "site": "interpreter_paths",
    "sysconfig": "interpreter_paths",
    "marshal": "dynamic_code",
    "_thread": "tracing",
}
_ATTR_RULES = {
    "_getframe": "frames",
    "_current_frames": "frames",
    "currentframe": "frames",
    "getouterframes": "frames",
    "getinnerframes": "frames",
    "stack": None,  # only as inspect.stack, below
    "trace": None,
    "f_back": "frames",
    "f_locals": "frames",
    "f_globals": "frames",
    "f_builtins": "frames",
    "f_code": "frames",
    "f_trace": "frames",
    "tb_frame": "frames",
    "tb_next": "frames",
    "walk_stack": "frames",
    "walk_tb": "frames",
    "get_stack": "frames",
    "gi_code": "frames",
    "cr_code": "frames",
    "gi_frame": "frames",
    "cr_frame": "frames",
    "ag_frame": "frames",
    "settrace": "tracing",
    "setprofile": "tracing",
    "gettrace": "tracing",
    "monitoring": "tracing",
    "addaudithook": "tracing",
    "settrace_all_threads": "tracing",
    "setprofile_all_threads": "tracing",
    "__code__": "code_objects",
    "__globals__": "code_objects",
    "__closure__": "code_objects",
    "__defaults__": "code_objects",
    "__kwdefaults__": "code_objects",
    "__subclasses__": "code_objects",
    "__bases__": "code_objects",
    "__mro__": "code_objects",
    "CodeType": "code_objects",
    "FunctionType": "code_objects",
    "replace_code": "code_objects",
    "modules": None,  # only as sys.modules, below
    "meta_path": "module_table",
    "path_hooks": "module_table",
    "path_importer_cache": "module_table",
    "__builtins__": "module_table",
    "prefix": None,
    "exec_prefix": None,
    "base_prefix": None,
    "getsitepackages": "interpreter_paths",
    "spec_from_file_location": "dynamic_code",
    "module_from_spec": "dynamic_code",
    "SourceFileLoader": "dynamic_code",
    "SourcelessFileLoader": "dynamic_code",
    "exec_module": "dynamic_code",
    "getusersitepackages": "interpreter_paths",
    "import_module": None,  # only with a computed name, below
    "write": None,  # only as os.write, below
    "dup": None,
    "dup2": None,
    "fdopen": None,
    "_exit": None,
}
_MODULE_ATTRS = {
    ("inspect", "stack"): "frames",
    ("inspect", "trace"): "frames",
    ("sys", "modules"): "module_table",
    ("sys", "prefix"): "interpreter_paths",
    ("sys", "exec_prefix"): "interpreter_paths",
    ("sys", "base_prefix"): "interpreter_paths",
    ("sys", "path"): "module_table",
    ("os", "write"): "result_channel",
    ("os", "dup"): "result_channel",
    ("os", "dup2"): "result_channel",
    ("os", "fdopen"): "result_channel",
    ("os", "_exit"): "result_channel",
    ("os", "writev"): "result_channel",
    ("os", "pwrite"): "result_channel",
    ("os", "kill"): "result_channel",
    ("os", "execv"): "result_channel",
    ("os", "execve"): "result_channel",
    ("os", "execl"): "result_channel",
    ("os", "execle"): "result_channel",
    ("os", "execlp"): "result_channel",
    ("os", "execvp"): "result_channel",
    ("os", "execvpe"): "result_channel",
    ("os", "posix_spawn"): "result_channel",
    ("os", "killpg"): "result_channel",
}
_STRING_MARKS = {
    "site-packages": "interpreter_paths",
    "dist-packages": "interpreter_paths",
    ".pth": "interpreter_paths",
    "sitecustomize": "interpreter_paths",
    "usercustomize": "interpreter_paths",
    "/dev/fd": "result_channel",
    "/proc/": "result_channel",
    "_pytest": "runner_internals",
    "pluggy": "runner_internals",
    "junitxml": "runner_internals",
    "PYTEST_ADDOPTS": "runner_internals",
    "PYTEST_PLUGINS": "runner_internals",
    "_preflab_runner": "runner_internals",
}
_DYNAMIC_CALLS = {"exec", "eval", "compile", "__import__", "breakpoint"}
_REFLECTIVE_CALLS = {"getattr", "setattr", "delattr", "hasattr", "vars"}
_SPECIAL_FILES = {
    "conftest.py": "runner_internals",
    "sitecustomize.py": "interpreter_paths",
    "usercustomize.py": "interpreter_paths",
    "pytest.py": "runner_internals",
}


class _Screen(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.found: list[tuple[str, str]] = []
        self.modules: dict[str, str] = {}  # local name -> module it is bound to

    def flag(self, rule: str, node: ast.AST, what: str) -> None:
        self.found.append((rule, f"{self.path}:{getattr(node, 'lineno', 0)}: {what}"))

    def _module_flag(self, module: str, node: ast.AST) -> None:
        top = module.split(".")[0]
        rule = _MODULE_RULES.get(top) or _MODULE_RULES.get(module)
        if rule:
            self.flag(rule, node, f"imports {module}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module_flag(alias.name, node)
            self.modules[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._module_flag(module, node)
        for alias in node.names:
            name = alias.name
            if module in ("unittest.mock", "mock") and name == "ANY":
                self.flag("lying_values", node, f"imports ANY from {module}")
            rule = _MODULE_ATTRS.get((module, name)) or _ATTR_RULES.get(name)
            if rule:
                self.flag(rule, node, f"imports {name} from {module}")
            if name == "*" and module in ("sys", "os", "inspect", "gc", "ctypes", "builtins"):
                self.flag("dynamic_code", node, f"imports * from {module}")
            self.modules[alias.asname or name] = f"{module}.{name}"
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        rule = _ATTR_RULES.get(node.attr)
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        module = self.modules.get(owner or "", owner or "")
        special = _MODULE_ATTRS.get((module, node.attr))
        if special:
            self.flag(special, node, f"uses {module}.{node.attr}")
        elif rule:
            self.flag(rule, node, f"uses .{node.attr}")
        elif node.attr == "__dict__" and owner in self.modules:
            self.flag("dynamic_code", node, f"reads the namespace of module {module}")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        """``alias = sys``: the alias is the module too (for the computed-getattr rule)."""
        if isinstance(node.value, ast.Name) and node.value.id in self.modules:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.modules[target.id] = self.modules[node.value.id]
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.flag("module_table", node, "uses __builtins__")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        if name in _DYNAMIC_CALLS:
            self.flag("dynamic_code", node, f"calls {name}()")
        bound = self.modules.get(name or "", "")
        if bound in ("importlib.import_module", "builtins.__import__"):
            if node.args and isinstance(node.args[0], ast.Constant):
                self._module_flag(str(node.args[0].value), node)
            else:
                self.flag("dynamic_code", node, f"{name}() with a computed name")
        if name in ("setattr", "delattr") and len(node.args) > 1:
            owner = node.args[0]
            mine = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            if not isinstance(node.args[1], ast.Constant) and not mine:
                self.flag("code_objects", node, f"{name}() with a computed name on another object")
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("__setattr__", "__delattr__", "__getattribute__")
            and isinstance(func.value, ast.Name)
            and func.value.id in ("object", "type")
        ):
            self.flag("code_objects", node, f"calls {func.value.id}.{func.attr}")
        if name in _REFLECTIVE_CALLS and node.args:
            target = node.args[0]
            computed = len(node.args) > 1 and not isinstance(node.args[1], ast.Constant)
            module_name = target.id if isinstance(target, ast.Name) else ""
            on_module = module_name in self.modules
            if name == "vars" and on_module:
                self.flag("dynamic_code", node, f"vars() of module {module_name}")
            elif computed and on_module:
                self.flag("dynamic_code", node, f"{name}() with a computed name on a module")
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                attr = node.args[1].value
                rule = _ATTR_RULES.get(attr) if isinstance(attr, str) else None
                if rule:
                    self.flag(rule, node, f"{name}(..., {attr!r})")
        if isinstance(func, ast.Attribute) and func.attr in (
            "import_module",
            "reload",
            "__import__",
        ):
            if node.args and isinstance(node.args[0], ast.Constant):
                self._module_flag(str(node.args[0].value), node)
            else:
                self.flag("dynamic_code", node, f"{func.attr}() with a computed name")
        if name == "open" and node.args and isinstance(node.args[0], ast.Constant):
            if isinstance(node.args[0].value, int):
                self.flag("result_channel", node, "opens a raw file descriptor")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name.startswith("pytest_"):
            self.flag("runner_internals", node, f"defines the pytest hook {node.name}")
        if node.name in ("__eq__", "__ne__") and _returns_a_constant(node):
            self.flag("lying_values", node, f"{node.name} returns a constant")
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
        defined = {
            getattr(t, "id", None)
            for stmt in node.body
            for t in (
                [stmt]
                if isinstance(stmt, ast.FunctionDef)
                else getattr(stmt, "targets", [getattr(stmt, "target", None)])
            )
        } | {stmt.name for stmt in node.body if isinstance(stmt, ast.FunctionDef)}
        if bases & _VALUE_TYPES and defined & _COMPARISONS - {"__hash__"}:
            self.flag("lying_values", node, f"class {node.name} redefines a built-in's comparison")
        if "__class__" in defined:
            self.flag("lying_values", node, f"class {node.name} sets __class__")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str | bytes):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            for mark, rule in _STRING_MARKS.items():
                if mark in text:
                    self.flag(rule, node, f"string mentions {mark!r}")
            if text in _ATTR_RULES and _ATTR_RULES[text]:
                self.flag(str(_ATTR_RULES[text]), node, f"string names {text!r}")


def _returns_a_constant(function: ast.FunctionDef) -> bool:
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    return bool(returns) and all(isinstance(r.value, ast.Constant) for r in returns)


def screen_source(path: str, source: str) -> list[tuple[str, str]]:
    """``(rule, "path:line: what")`` for each finding in one Python file."""
    try:
        tree = ast.parse(source.encode("utf-8"), filename=path)
    except (SyntaxError, ValueError) as e:
        return [("dynamic_code", f"{path}: cannot be parsed ({e.__class__.__name__}: {e})")]
    screen = _Screen(path)
    screen.visit(tree)
    return screen.found


def screen_files(files: Mapping[str, str], *, allow: Iterable[str] = ()) -> list[str]:
    """Every finding in the candidate's files, minus the allowed rules, as readable reasons."""
    allowed = set(allow)
    found: list[tuple[str, str]] = []
    for path, text in sorted(files.items()):
        name = PurePosixPath(path).name
        if name in _SPECIAL_FILES:
            found.append((_SPECIAL_FILES[name], f"{path}: a {name} file"))
        if name.endswith(".pth"):
            found.append(("interpreter_paths", f"{path}: a .pth file"))
        if name.endswith(".py"):
            found.extend(screen_source(path, text))
    seen, out = set(), []
    for rule, where in found:
        if rule not in allowed and (rule, where) not in seen:
            seen.add((rule, where))
            out.append(f"[{rule}] {where}")
    return out
