#!/usr/bin/env python3
"""The house's measures (issue 34): lines per crate, the longest functions, the rope's public
methods, pe-core's Error variants. Reads the sources as text; run from anywhere.

    python3 scripts/house-metrics.py [--longest N] [--over LINES]
"""
import argparse
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")


def strip(line):
    """The line without its `//` comment and string contents (braces in them do not count)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


def functions(path):
    """(name, first line, length) of every fn with a body, outside `#[cfg(test)]` modules."""
    lines = path.read_text().splitlines()
    out, i, skip_depth, depth = [], 0, None, 0
    pending_test = False
    while i < len(lines):
        code = strip(lines[i])
        if "#[cfg(test)]" in code:
            pending_test = True
        m = FN.match(code)
        if m and skip_depth is None:
            # Find the body's opening brace (or a `;`: a declaration without a body).
            j, opened = i, None
            while j < len(lines):
                c = strip(lines[j])
                if "{" in c:
                    opened = j
                    break
                if c.rstrip().endswith(";"):
                    break
                j += 1
            if opened is not None:
                d, k = 0, opened
                while k < len(lines):
                    c = strip(lines[k])
                    d += c.count("{") - c.count("}")
                    if d <= 0 and k >= opened:
                        break
                    k += 1
                out.append((m.group(7), i + 1, k - i + 1))
                # Nested fns are counted inside their parent only.
                for c in lines[i : k + 1]:
                    depth += strip(c).count("{") - strip(c).count("}")
                i = k + 1
                continue
        if pending_test and re.match(r"\s*mod\s+\w+\s*\{", code) and skip_depth is None:
            skip_depth = depth
            pending_test = False
        depth += code.count("{") - code.count("}")
        if skip_depth is not None and depth <= skip_depth:
            skip_depth = None
        i += 1
    return out


def rust_files(folder):
    return sorted(p for p in folder.rglob("*.rs") if "target" not in p.parts)


def library_files():
    files = []
    for crate in sorted((ROOT / "crates").iterdir()):
        files += rust_files(crate / "src")
    return files + rust_files(ROOT / "src")


def braced(text, m):
    """What stands between the `{` that match `m` ends with and its closing `}`."""
    d, k = 0, m.end() - 1
    while True:
        d += {"{": 1, "}": -1}.get(text[k], 0)
        if d == 0:
            return text[m.end() : k]
        k += 1


def public_methods(type_name):
    """`pub fn` in every `impl TYPE` block of the workspace's library code."""
    names = []
    for path in library_files():
        text = path.read_text()
        for m in re.finditer(r"^impl(<[^>]*>)?\s+" + type_name + r"\s*\{", text, re.M):
            names += re.findall(r"^    pub fn (\w+)", braced(text, m), re.M)
    return names


def error_variants():
    text = (ROOT / "crates/pe-core/src/describe/error.rs").read_text()
    body = braced(text, re.search(r"pub enum Error\s*\{", text))
    return re.findall(r"^    ([A-Z]\w*)", body, re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--longest", type=int, default=10)
    ap.add_argument("--over", type=int, default=60)
    args = ap.parse_args()
    print("lines of Rust under src/, per crate")
    for crate in sorted((ROOT / "crates").iterdir()):
        n = sum(len(p.read_text().splitlines()) for p in rust_files(crate / "src"))
        print(f"  {crate.name:14} {n:6}")
    fns = [(n, str(p.relative_to(ROOT)), line, name) for p in library_files() for name, line, n in functions(p)]
    fns.sort(reverse=True)
    print(f"\nthe {args.longest} longest library functions (crates/*/src, src; test modules left out)")
    for n, path, line, name in fns[: args.longest]:
        print(f"  {n:4}  {path}:{line} {name}")
    over = [f for f in fns if f[0] > args.over]
    print(f"\nlibrary functions over {args.over} lines: {len(over)}")
    ex = []
    for folder in [ROOT / "examples", ROOT / "benches", *sorted((ROOT / "crates").glob("*/examples"))]:
        for p in rust_files(folder):
            ex += [(n, str(p.relative_to(ROOT)), line, name) for name, line, n in functions(p)]
    ex.sort(reverse=True)
    print(f"examples and benches: functions over {args.over} lines: {len([f for f in ex if f[0] > args.over])}")
    for n, path, line, name in ex[:5]:
        print(f"  {n:4}  {path}:{line} {name}")
    for t in ["RotaryEmbedding", "Rope"]:
        names = public_methods(t)
        print(f"\npublic methods of {t}: {len(names)}: {', '.join(names)}")
    v = error_variants()
    print(f"\npe-core Error variants: {len(v)}: {', '.join(v)}")


if __name__ == "__main__":
    main()
