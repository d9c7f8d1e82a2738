#!/usr/bin/env python3
"""Which CUDA kernels of libflashattn a set of runs launched (issue 10, item 6).

  kernel_coverage.py list LIB                 every __global__ instantiation in LIB
  kernel_coverage.py report LIB NCU_CSV...    diff against the kernels ncu saw

The library's kernels come from its host-side launch stubs: nvcc emits, for
every __global__ instantiation, a host function `__device_stub__<mangled
kernel>` (and static locals inside it), so `nm LIB` names every kernel the
library can launch, for every architecture, with no cuobjdump needed.
The launched kernels come from `ncu --csv --page raw --print-kernel-base
mangled` over the same runs (bench/gpu/h200_sanitize_all.sh). With demangled
names (an ncu without --print-kernel-base) both sides are compared after
normalising spaces, `(int)`/`(bool)` casts and the parameter list.

Exit status of `report`: 0 when every kernel was launched or is listed in
EXPECTED_UNLAUNCHED below, 1 otherwise, 2 when nothing could be read.
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys

# Kernels a run on an H200 (sm_90, 227 KiB opt-in shared memory) cannot
# launch, with the reason; they are reported but do not fail the check.
EXPECTED_UNLAUNCHED = [
    (re.compile(r"probe_kernel"),
     "never launched: dispatch only asks cudaFuncGetAttributes whether the build has code for the device"),
    # bwd_kernel<T, D, DET, BIG_SMEM, VAR, SEQ>: BIG_SMEM false at D 256, any VAR / SEQ.
    (re.compile(r"sm80::bwd_kernel<[^,]+, 256, (true|false), false(, (true|false))*>"),
     "sm80 d256 backward for devices with < BwdCfg<256,true>::smem() opt-in shared memory; "
     "the H200 takes the BIG_SMEM=true variant"),
]


def demangle(names):
    if not names:
        return {}
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if tool is None:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    if len(out) != len(names):
        return {n: n for n in names}
    return dict(zip(names, out))


def library_kernels(lib: str) -> list:
    """Mangled names of every __global__ instantiation in lib (from nm)."""
    nm = shutil.which("nm")
    if nm is None:
        raise SystemExit("kernel_coverage: nm (binutils) not found")
    out = subprocess.run([nm, lib], capture_output=True, text=True, check=True).stdout
    kernels = set()
    for line in out.splitlines():
        sym = line.split()[-1] if line.split() else ""
        # <len>__device_stub__<mangled kernel without its leading '_'>...
        for m in re.finditer(r"(\d+)(__device_stub__)", sym):
            ident = sym[m.start(2):m.start(2) + int(m.group(1))]
            kernels.add(ident[len("__device_stub_"):])  # keeps "_Z..."
    return sorted(kernels)


def short(demangled: str) -> str:
    s = demangled.replace("flashattn::detail::cuda::", "").replace("flashattn::ring::detail::kernels::", "ring::")
    s = s.replace("__nv_bfloat16", "bf16").replace("__half", "f16")
    return s


def key(name: str) -> str:
    """Comparable form of a demangled name: no return type, parameters or spacing."""
    s = name.replace(" ", "")
    s = s.replace("(bool)1", "true").replace("(bool)0", "false")
    s = re.sub(r"\((int|unsignedint|long)\)", "", s)
    s = re.sub(r"^void", "", s)
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):  # drop the top-level parameter list
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    return s[:cut]


def launched_kernels(paths) -> set:
    names = set()
    for p in paths:
        try:
            lines = [ln for ln in open(p, errors="replace") if ln.startswith('"')]
        except OSError:
            continue
        if not lines:
            continue
        for row in csv.DictReader(lines):
            n = (row.get("Kernel Name") or row.get("Function Name") or "").strip()
            if n and n != "Kernel Name":
                names.add(n)
    return names


def main(argv) -> int:
    if len(argv) >= 2 and argv[0] == "list":
        ks = library_kernels(argv[1])
        d = demangle(ks)
        for k in ks:
            print(short(d[k]))
        print(f"# {len(ks)} kernel instantiations in {argv[1]}")
        return 0
    if len(argv) < 3 or argv[0] != "report":
        print(__doc__)
        return 2
    lib, csvs = argv[1], argv[2:]
    ks = library_kernels(lib)
    seen = launched_kernels(csvs)
    if not ks or not seen:
        print(f"coverage: could not read the kernel lists (library: {len(ks)}, launched: {len(seen)})")
        return 2
    d = demangle(ks)
    mangled = any(s.startswith("_Z") for s in seen)
    if mangled:
        hit = {k for k in ks if k in seen}
    else:  # ncu printed demangled names
        seen_keys = {key(s) for s in seen}
        hit = {k for k in ks if key(d[k]) in seen_keys}
    missing, expected = [], []
    for k in ks:
        if k in hit:
            continue
        why = next((r for pat, r in EXPECTED_UNLAUNCHED if pat.search(short(d[k]))), None)
        (expected if why else missing).append((short(d[k]), why))
    print(f"coverage: {len(hit)} of {len(ks)} kernel instantiations launched "
          f"({'mangled' if mangled else 'demangled'} names from ncu)")
    for k in sorted(hit, key=lambda x: short(d[x])):
        print(f"  launched      {short(d[k])}")
    for n, why in expected:
        print(f"  not launched  {n}   (expected: {why})")
    for n, _ in missing:
        print(f"  NOT COVERED   {n}")
    foreign = sorted(s for s in seen if (s if mangled else key(s)) not in
                     ({*ks} if mangled else {key(d[k]) for k in ks}))
    if foreign:
        print(f"  ({len(foreign)} launched kernels not from libflashattn, e.g. the tests' own: "
              + ", ".join(foreign[:3]) + ")")
    print(f"coverage: {len(missing)} kernel instantiation(s) never launched and not expected to be")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
