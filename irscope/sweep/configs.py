"""What a sweep asks for: GPU targets, kernel signatures, constexprs and compile options,
and the configurations (the cartesian product of ``--sweep NAME=V1,V2`` axes) they expand to,
each made a compile job."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from irscope.collectors.triton_aot import Job
from irscope.errors import UsageError

OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}
DEFAULT_ARCH = "sm_90a"

# *fp16   i32   *kfp32 (const pointer)   fp8e4nv   constexpr   tensordesc<fp16[64, 64]>
# and, as in Triton's own AOT tool, ":16" for a pointer or integer divisible by 16: *fp16:16
TRITON_TYPE = re.compile(r"^(\*k?|k)?(i1|u1|[iu](8|16|32|64)|fp(8e4nv|8e5|8e4b15|8e4b8|8e5b16|16|32|64)"
                         r"|bf16)(:16)?$|^constexpr$|^tensordesc<.+>$|^nvTmaDesc$")
# x_ptr=*fp16, n: i32      (a comma that starts the next NAME= entry splits)
SIGNATURE_SPLIT = re.compile(r",\s*(?=[A-Za-z_]\w*\s*[=:])")
# x_ptr=*fp16   n: i32
SIGNATURE_ENTRY = re.compile(r"^\s*([A-Za-z_]\w*)\s*[=:]\s*(\S.*?)\s*$")
# sm_90a  sm80  90  compute_89  sm_100f
ARCH = re.compile(r"^(?:sm_?|compute_)?(\d{2,3})[af]?$", re.IGNORECASE)
ARCH_FAMILIES = {"ampere": 80, "ada": 89, "hopper": 90, "blackwell": 100}


def arch_name(capability: int) -> str:
    """The name ptxas targets for a capability, as Triton emits it (sm_80, sm_90a, sm_100a)."""
    return f"sm_{capability}{'a' if capability >= 90 else ''}"


def parse_arch(text: str) -> int:
    """The compute capability meant by sm_90a, sm80, 89, compute_80 or a family name."""
    text = text.strip()
    if text.lower() in ARCH_FAMILIES:
        return ARCH_FAMILIES[text.lower()]
    match = ARCH.match(text)
    if not match:
        raise UsageError(f"--arch: {text!r} is not a GPU architecture (like sm_80, sm_90a, sm_100a)")
    return int(match.group(1))


def parse_value(text: str) -> Any:
    """A constexpr value: int, float, bool, else the text itself."""
    text = text.strip()
    if text in ("True", "False", "true", "false"):
        return text.lower() == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_signature(text: str) -> dict[str, str]:
    """``x_ptr=*fp16,n=i32`` (or ``x_ptr: *fp16, n: i32``) as {name: Triton type}."""
    signature: dict[str, str] = {}
    for entry in SIGNATURE_SPLIT.split(text.strip()) if text.strip() else []:
        match = SIGNATURE_ENTRY.match(entry)
        if not match or not TRITON_TYPE.match(match.group(2)):
            raise UsageError(f"--signature: {entry.strip()!r} is not NAME=TYPE with a Triton type "
                             "(like x_ptr=*fp16, n=i32, eps=fp32)")
        name, kind = match.groups()
        if name in signature:
            raise UsageError(f"--signature: {name} is given twice")
        signature[name] = kind
    return signature


def parse_assignment(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier() or not value.strip():
        raise UsageError(f"{flag}: {text!r} is not NAME=VALUE")
    return name.strip(), value.strip()


@dataclass(frozen=True)
class Config:
    """One point of a sweep: target, the constexprs the user set, and compile options."""

    capability: int
    constexprs: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, int], ...]

    @property
    def arch(self) -> str:
        return arch_name(self.capability)

    def settings(self) -> dict[str, Any]:
        """Constexprs then options, as one flat mapping (the unit's ``config`` attribute)."""
        return {**dict(self.constexprs), **dict(self.options)}

    def ordered(self, params: Sequence[str]) -> "Config":
        """The same configuration with constexprs in the kernel's parameter order."""
        rank = {name: i for i, name in enumerate(params)}
        return Config(self.capability, tuple(sorted(self.constexprs, key=lambda kv: rank.get(
            kv[0], len(rank)))), self.options)

    def unit_name(self, kernel: str) -> str:
        """``matmul_kernel[sm_90a,BLOCK_M=128,num_warps=4,num_stages=3]``."""
        parts = [self.arch] + [f"{k}={v}" for k, v in self.settings().items()]
        return f"{kernel}[{','.join(parts)}]"


def expand(constexprs: Sequence[str], sweeps: Sequence[str], archs: Sequence[str],
           options: dict[str, int | None]) -> list[Config]:
    """Every configuration of the cartesian product of ``--sweep`` axes, in a stable order."""
    fixed = dict(parse_assignment(c, "--constexpr") for c in constexprs)
    axes: dict[str, list[Any]] = {}
    for text in sweeps:
        name, values = parse_assignment(text, "--sweep")
        if name in axes:
            raise UsageError(f"--sweep: {name} is swept twice")
        items = [v.strip() for v in values.split(",") if v.strip()]
        axes[name] = [parse_arch(v) for v in items] if name == "arch" else items
    if "arch" not in axes:
        caps = [parse_arch(a) for text in archs or [DEFAULT_ARCH] for a in text.split(",") if a]
        axes = {"arch": list(dict.fromkeys(caps)), **axes}
    chosen = {**DEFAULT_OPTIONS, **{k: v for k, v in options.items() if v is not None}}
    configs = []
    for point in itertools.product(*axes.values()):
        values = dict(zip(axes, point))
        capability = values.pop("arch")
        settings = {**fixed, **values}
        opts = dict(chosen)
        for name in OPTIONS:
            if name in settings:
                opts[name] = _option(name, settings.pop(name))
        configs.append(Config(capability, tuple((k, parse_value(str(v)))
                                                for k, v in settings.items()),
                              tuple(opts.items())))
    return configs


def _option(name: str, value: Any) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{name}: {value!r} is not a whole number") from None
    if number < 1 or (name == "num_warps" and number & (number - 1)):
        raise UsageError(f"{name}: {number} is not allowed (num_warps must be a power of two)")
    return number


def jobs_for(path: str, info, signature: dict[str, str], configs: Sequence[Config],
             example_constexprs: dict[str, Any] | None = None) -> list:
    """A Job per configuration, with every parameter typed or given a constexpr value."""
    params = set(info.params)
    unknown = sorted(set(signature) - params)
    if unknown:
        raise UsageError(f"--signature: {info.name} has no parameter {unknown[0]!r} "
                         f"(parameters: {', '.join(info.params)})")
    jobs = []
    for config in configs:
        constexprs = {**info.defaults, **(example_constexprs or {}), **dict(config.constexprs)}
        constexprs = {k: v for k, v in constexprs.items()
                      if k in info.constexpr_params or k in dict(config.constexprs)}
        for name in constexprs:
            if name not in params:
                raise UsageError(f"{info.name} has no parameter {name!r} to set "
                                 f"(parameters: {', '.join(info.params)})")
        missing = [p for p in info.constexpr_params if p not in constexprs]
        if missing:
            raise UsageError(f"constexpr {missing[0]} has no value: give --constexpr {missing[0]}=N "
                             f"or --sweep {missing[0]}=N1,N2")
        untyped = [p for p in info.params if p not in constexprs and p not in signature]
        if untyped:
            raise UsageError(f"--signature: no type for {', '.join(untyped)} (e.g. "
                             f"--signature '{untyped[0]}=*fp16')")
        typed = {p: signature[p] for p in info.params if p not in constexprs}
        jobs.append(Job(path, info.name, typed, constexprs, config.capability,
                        dict(config.options)))
    return jobs
