"""The Kubeflow SDK's function trainer: the command that runs ``CustomTrainer(func=...)`` on each node.

Kubeflow ships a training function as its *source*, not as a pickle: the trainer container
writes the function's text (dedented) to a file, adds a call with ``func_args`` as keyword
arguments (``train(**{'lr': 0.1})``), and runs that file with ``torchrun`` on torch runtimes,
under ``mpirun`` on MPI runtimes (mpi, deepspeed, mlx) and with ``python`` otherwise, after
installing ``packages_to_install`` from ``pip_index_urls``. This module builds the same command
(:func:`trainer_command`), and the same program for the local backend (:func:`function_program`).

Only the function's own text reaches the nodes, so whatever it needs from around it does not.
Kubeflow finds out on the cluster, with a NameError in the pod's logs; here the function is
refused before submission, with the reason and the fix (:func:`check_function`): a lambda, a
method, a built-in or other callable that is not a plain ``def``; an async or generator
function (calling it would not run its body); a decorated function (the decorator is not sent);
a nested function using variables of its enclosing function; a function using module-level
names other than builtins (modules imported at the top of the notebook included: Kubeflow's
rule is to import inside the function); defaults or annotations naming such names (the node
evaluates them when it defines the function); ``func_args`` that are not a dict of Python
literals, or that do not fit the function's parameters.
"""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import inspect
import os
import re
import shlex
import textwrap
import types
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

__all__ = [
    "trainer_command",
    "check_function",
    "check_func_args",
    "function_program",
    "function_file",
    "entrypoint_kind",
    "install_script",
]

#: Frameworks (a runtime's ``trainer.kubeflow.org/framework``) whose runtimes have Kubeflow's
#: torch policy, run with torchrun, and those with its MPI policy, run under mpirun.
TORCH_FRAMEWORKS = frozenset({"torch"})
MPI_FRAMEWORKS = frozenset({"mpi", "deepspeed", "mlx"})
#: Runtimes that run Kubeflow's BuiltinTrainer (``tune run``), where a function cannot go.
BUILTIN_FRAMEWORKS = frozenset({"torchtune"})

#: Kubeflow's DEFAULT_MPI_USER_HOME and hostfile: under mpirun the file goes in the MPI
#: user's home, which every rank can write.
MPI_USER_HOME = "/home/mpiuser"
MPI_HOSTFILE = "/etc/mpi/hostfile"

# Names a module-level script has without importing anything.
_SCRIPT_NAMES = frozenset({"__name__", "__file__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__", "__annotations__"})
_BUILTINS = frozenset(dir(builtins))
_LITERALS = "str, int, float, bool, None, bytes, and lists, tuples, dicts and sets of them"


def trainer_command(trainer: Any, framework: str) -> Tuple[List[str], List[str]]:
    """The trainer container's ``(command, args)`` for a function trainer on a runtime of ``framework``.

    ``trainer`` needs ``func``, ``func_args``, ``packages_to_install`` and ``pip_index_urls``
    (Kubeflow's ``CustomTrainer``). As Kubeflow, the whole program is in the command
    (``bash -c SCRIPT``, under ``mpirun --hostfile /etc/mpi/hostfile`` on MPI runtimes) and
    args is empty; any args the runtime's container has only become bash's ``$0``, ``$1``....
    Raises ValueError, naming the reason and the fix, for a function or func_args that cannot
    run on the nodes (:func:`check_function`, :func:`check_func_args`).
    """
    kind = entrypoint_kind(framework)
    program = function_program(trainer.func, getattr(trainer, "func_args", None))
    packages = _packages(getattr(trainer, "packages_to_install", None))
    index_urls = _index_urls(getattr(trainer, "pip_index_urls", None))
    mpi = kind == "mpirun"
    path = function_file(trainer.func)
    if mpi:
        path = MPI_USER_HOME + "/" + path

    lines = [
        # "python" as Kubeflow runs it, else python3 (images with no "python" on PATH).
        'PY=python; command -v python >/dev/null 2>&1 || PY=python3',
    ]
    if packages:
        log = shlex.quote(MPI_USER_HOME + "/kiln-pip-install.log") if mpi else '"${TMPDIR:-/tmp}/kiln-pip-install.log"'
        lines.append(install_script(packages, index_urls, python='"$PY"', log=log))
    delim = _heredoc_delimiter(program)
    # A quoted delimiter: bash writes the source as it is, expanding no $, ` or \ in it
    # (Kubeflow's unquoted EOM mangles a function that prints "$HOME" or a "\n").
    lines.append(f"cat > {shlex.quote(path)} <<'{delim}'\n{program}{delim}")
    if kind == "torchrun":
        lines.append(f"exec torchrun {shlex.quote(path)}")
    else:
        lines.append(f'exec "$PY" {shlex.quote(path)}')
    command = ["bash", "-c", "\n".join(lines) + "\n"]
    if mpi:
        command = ["mpirun", "--hostfile", MPI_HOSTFILE] + command
    return command, []


def entrypoint_kind(framework: Optional[str]) -> str:
    """How a runtime of ``framework`` runs the function: ``torchrun``, ``mpirun`` or ``python``."""
    fw = (framework or "").strip().lower()
    if fw in BUILTIN_FRAMEWORKS:
        raise ValueError(
            f"runtime framework {framework!r} runs Kubeflow's BuiltinTrainer (tune run), not a function: "
            "use CustomTrainer(func=...) on a torch runtime such as torch-distributed"
        )
    if fw in TORCH_FRAMEWORKS:
        return "torchrun"
    if fw in MPI_FRAMEWORKS:
        return "mpirun"
    return "python"


def function_program(func: Callable[..., Any], func_args: Optional[Dict[str, Any]]) -> str:
    """The program a node runs: the function's source, dedented, and a call with ``func_args``
    as keyword arguments (``train(**{'lr': 0.1})``, or ``train()`` without them), as Kubeflow
    writes it. Checks both first (ValueError)."""
    source = check_function(func)
    args = check_func_args(func, func_args)
    call = f"{func.__name__}()" if args is None else f"{func.__name__}(**{args})"
    return f"{source.rstrip()}\n\n\n{call}\n"


def function_file(func: Callable[..., Any]) -> str:
    """The file name the program is written to: that of the file defining the function, as in
    Kubeflow (a notebook cell's is its kernel's temporary file name), reduced to a safe name."""
    try:
        name = os.path.basename(inspect.getfile(func))
    except TypeError:
        name = ""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".-")
    if not name:
        name = "train.py"
    if not name.endswith(".py"):
        name += ".py"
    return name


def install_script(packages: Sequence[str], index_urls: Sequence[str], *, python: str = "python", log: str = "kiln-pip-install.log", user: bool = True) -> str:
    """Bash that pip installs ``packages`` from ``index_urls`` (the first the index, the others
    extra indexes; none: pip's configured index) as Kubeflow's trainer does: pip bootstrapped
    with ensurepip when missing, a per-user install first, then a system-wide one (a per-user
    install is refused inside a virtualenv), pip's output kept in ``log`` and shown only when
    both fail, and then the script exits 1. ``user=False`` skips the per-user attempt (a
    virtualenv that sees the system's packages would take it, into the user's home). ``python``
    and ``log`` are bash words (quoted by the caller: they may expand variables)."""
    pkgs = " ".join(shlex.quote(p) for p in packages)
    opts: List[str] = []
    for i, url in enumerate(index_urls):
        opts += ["--index-url" if i == 0 else "--extra-index-url", shlex.quote(url)]
    pip = f"PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 {python} -m pip install --quiet --no-warn-script-location"
    attempts = []
    if user:
        attempts.append(("if", "--user ", ">", "user"))
    attempts.append(("elif" if user else "if", "", ">>" if user else ">", "system-wide"))
    tries = "".join(
        f"""{kw} {pip} "${{KILN_PIP_OPTS[@]}}" {flag}"${{KILN_PACKAGES[@]}}" {redirect}"$KILN_PIP_LOG" 2>&1; then
    echo "Successfully installed Python packages ({where}): ${{KILN_PACKAGES[*]}}"
"""
        for kw, flag, redirect, where in attempts
    )
    ensurepip = f"{python} -m ensurepip --user >/dev/null 2>&1 || {python} -m ensurepip >/dev/null 2>&1" if user else f"{python} -m ensurepip >/dev/null 2>&1"
    return (
        f"""if ! {python} -m pip --version >/dev/null 2>&1; then
    {ensurepip}
fi
KILN_PACKAGES=({pkgs})
KILN_PIP_OPTS=({" ".join(opts)})
KILN_PIP_LOG={log}
"""
        + tries
        + """else
    echo "ERROR: Failed to install Python packages: ${KILN_PACKAGES[*]}" >&2
    cat "$KILN_PIP_LOG" >&2
    exit 1
fi"""
    )


# -- checks ------------------------------------------------------------------------------------


def check_function(func: Callable[..., Any]) -> str:
    """The function's source, dedented, once it is known to run on its own on a node; else
    ValueError with the reason and the fix."""
    _check_plain(func)
    name = func.__name__
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as e:
        raise ValueError(
            f"CustomTrainer.func {name}: its source cannot be read ({e}); it is the source that runs on the nodes: "
            "define the function in a .py file or a notebook cell, not with exec() or in an interactive prompt"
        ) from None
    node = _def_node(source, name)
    if node.decorator_list:
        decos = ", ".join("@" + (ast.get_source_segment(source, d) or "...").strip() for d in node.decorator_list)
        raise ValueError(_decorated(name, decos))

    closure = list(func.__code__.co_freevars)
    if closure:
        raise ValueError(
            f"CustomTrainer.func {name} uses variables of the function it is defined in: {', '.join(closure)}. "
            "Only the function's source reaches the nodes, not those values: pass them through func_args "
            "(CustomTrainer(func_args={...})), or define the function at module level"
        )

    stored: Set[str] = set()
    used = _global_names(func.__code__, stored)
    allowed = _BUILTINS | _SCRIPT_NAMES | {name} | stored
    outside = sorted(n for n in used if n not in allowed)
    if outside:
        raise ValueError(_outside(name, outside, func.__globals__))

    header = sorted(n for n in _header_names(node) if n not in _BUILTINS)
    if header:
        raise ValueError(
            f"CustomTrainer.func {name}: its default values or annotations use names defined outside it: {', '.join(header)}. "
            "The node evaluates them when it defines the function, where those names do not exist: "
            "use literal defaults (or pass the values through func_args) and annotations of builtins only (or none)"
        )
    return source


def check_func_args(func: Callable[..., Any], func_args: Optional[Dict[str, Any]]) -> Optional[str]:
    """``func_args`` as the Python literal the node's program passes (``None`` for no
    arguments), once they are known to travel (a dict of literals with string keys) and to fit
    the function's parameters; else ValueError."""
    name = getattr(func, "__name__", "func")
    if func_args is not None:
        if not isinstance(func_args, dict):
            raise ValueError(
                f"CustomTrainer.func_args must be a dict of keyword arguments for {name}, got a {type(func_args).__name__}: "
                "e.g. func_args={'lr': 0.01, 'epochs': 3}"
            )
        bad_keys = [k for k in func_args if not isinstance(k, str)]
        if bad_keys:
            raise ValueError(f"CustomTrainer.func_args: keys must be parameter names (strings), got {', '.join(repr(k) for k in bad_keys)}")
        bad = [k for k, v in func_args.items() if not _round_trips(v)]
        if bad:
            what = ", ".join(f"{k!r} ({type(func_args[k]).__name__}: {_short(func_args[k])})" for k in bad)
            raise ValueError(
                f"CustomTrainer.func_args {what}: the values are written into the node's program as Python literals, "
                f"so they must be {_LITERALS} (no nan or inf). Pass a path, a URI or plain numbers and strings instead, "
                "and build the object inside the function"
            )
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        try:
            sig.bind(**(func_args or {}))
        except TypeError as e:
            raise ValueError(
                f"CustomTrainer.func_args do not fit {name}{sig}: {e}. The node calls {name}(**func_args): "
                "give every parameter without a default a value in func_args, and no others"
            ) from None
    return None if func_args is None else repr(func_args)


def _check_plain(func: Any) -> None:
    what = _not_plain(func)
    if what:
        raise ValueError(
            f"CustomTrainer.func must be a plain function defined with def, got {what}: its source is what runs on the nodes. "
            "Write a module-level `def train(...):` that does the work (imports inside it), and pass values through func_args"
        )
    if func.__name__ == "<lambda>":
        raise ValueError(
            "CustomTrainer.func is a lambda: its source cannot run on its own on the nodes. "
            "Define the function with def (imports inside it) and pass values through func_args"
        )
    if hasattr(func, "__wrapped__"):
        raise ValueError(_decorated(func.__name__, "a decorator (functools.wraps)"))
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        raise ValueError(
            f"CustomTrainer.func {func.__name__} is an async function: the node calls it, which would only create a coroutine "
            "and run none of it. Make it a plain def (call asyncio.run(...) inside it if you need async code)"
        )
    if inspect.isgeneratorfunction(func):
        raise ValueError(
            f"CustomTrainer.func {func.__name__} is a generator function (it yields): the node calls it, which would only "
            "create a generator and run none of it. Make it a plain def that does the work (no yield at its top level)"
        )


def _not_plain(func: Any) -> str:
    """What func is when it is not a plain function ('' when it is)."""
    if isinstance(func, functools.partial):
        return "a functools.partial (its bound arguments would not reach the nodes; pass them through func_args)"
    if inspect.ismethod(func):
        return f"a bound method ({type(func.__self__).__name__}.{func.__name__}; its object would not reach the nodes)"
    if inspect.isbuiltin(func) or isinstance(func, (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType)):
        return f"a built-in ({getattr(func, '__qualname__', func)!s}, which has no Python source)"
    if inspect.isclass(func):
        return f"a class ({func.__name__})"
    if not inspect.isfunction(func):
        return f"a {type(func).__name__} object" if callable(func) else f"{func!r}, which is not callable"
    return ""


def _decorated(name: str, decos: str) -> str:
    return (
        f"CustomTrainer.func {name} is decorated ({decos}): only the function's own source reaches the nodes, "
        "without the decorator or what it wraps. Remove the decorator, or apply what it does inside the function"
    )


def _def_node(source: str, name: str) -> ast.FunctionDef:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"CustomTrainer.func {name}: its source does not parse on its own ({e.msg}, line {e.lineno}): define it with def at the start of a line") from None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != name:
        raise ValueError(f"CustomTrainer.func {name}: its source is not a def of {name}: define the function with def {name}(...):")
    return node


def _global_names(code: types.CodeType, stored: Set[str]) -> Set[str]:
    """The module-level (global) names code and the code nested in it read; the names it
    assigns with ``global`` go to ``stored``. Read from the bytecode, not co_names, which also
    holds attribute names (``torch.nn`` puts ``nn`` there)."""
    used: Set[str] = set()
    local_names: Set[str] = set()
    name_loads: Set[str] = set()
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op == "LOAD_GLOBAL":
            used.add(ins.argval)
        elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            stored.add(ins.argval)
        elif op in ("LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"):
            # A class body's lookup: its own names, then the module's.
            name_loads.add(ins.argval)
        elif op in ("STORE_NAME", "DELETE_NAME"):
            local_names.add(ins.argval)
    used |= name_loads - local_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            used |= _global_names(const, stored)
    return used


def _header_names(node: ast.FunctionDef) -> Iterator[str]:
    """The names read by the def line itself: defaults and annotations."""
    a = node.args
    exprs: List[Optional[ast.expr]] = list(a.defaults) + list(a.kw_defaults) + [node.returns]
    for arg in list(getattr(a, "posonlyargs", [])) + list(a.args) + list(a.kwonlyargs) + [a.vararg, a.kwarg]:
        if arg is not None:
            exprs.append(arg.annotation)
    for e in exprs:
        if e is None:
            continue
        for n in ast.walk(e):
            if isinstance(n, ast.Name):
                yield n.id


def _outside(name: str, names: Sequence[str], module_globals: Dict[str, Any]) -> str:
    """The refusal of a function that reads module-level names, with a fix for each kind."""
    modules, others = [], []
    for n in names:
        v = module_globals.get(n)
        if isinstance(v, types.ModuleType):
            modules.append(f"import {v.__name__}" if v.__name__ == n else f"import {v.__name__} as {n}")
        else:
            others.append(n)
    fixes = []
    if modules:
        fixes.append(f"import inside the function ({'; '.join(modules)})")
    if others:
        fixes.append(f"define {', '.join(others)} inside the function or pass the values through func_args")
    return (
        f"CustomTrainer.func {name} uses names defined outside it: {', '.join(names)}. "
        "Only the function's source reaches the nodes, where those names do not exist "
        f"(Kubeflow's rule: the function must be self-contained): {'; and '.join(fixes)}"
    )


def _round_trips(v: Any) -> bool:
    try:
        return bool(ast.literal_eval(repr(v)) == v)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _short(v: Any) -> str:
    try:
        r = repr(v)
    except Exception:  # noqa: BLE001 - a repr that fails is reported, not raised
        r = f"<{type(v).__name__}>"
    return r if len(r) <= 60 else r[:57] + "..."


def _packages(packages: Optional[Sequence[str]]) -> List[str]:
    if not packages:
        return []
    if isinstance(packages, str):
        raise ValueError(f"CustomTrainer.packages_to_install must be a list of requirements, got the string {packages!r}: write [{packages!r}]")
    out = [p.strip() for p in packages if isinstance(p, str) and p.strip()]
    if len(out) != len(list(packages)):
        raise ValueError(f"CustomTrainer.packages_to_install: every entry must be a requirement string such as 'numpy' or 'transformers>=4.40', got {list(packages)!r}")
    return out


def _index_urls(urls: Optional[Sequence[str]]) -> List[str]:
    if not urls:
        return []
    if isinstance(urls, str):
        raise ValueError(f"CustomTrainer.pip_index_urls must be a list of URLs, got the string {urls!r}: write [{urls!r}]")
    out = [u.strip() for u in urls if isinstance(u, str) and u.strip()]
    if len(out) != len(list(urls)):
        raise ValueError(f"CustomTrainer.pip_index_urls: every entry must be an index URL, got {list(urls)!r}")
    return out


def _heredoc_delimiter(program: str) -> str:
    lines = set(program.splitlines())
    delim, n = "KILN_TRAIN_FUNC_EOF", 0
    while delim in lines:
        n += 1
        delim = f"KILN_TRAIN_FUNC_EOF_{n}"
    return delim
