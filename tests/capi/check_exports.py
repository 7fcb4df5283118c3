#!/usr/bin/env python3
"""check_exports.py LIBRARY INCLUDE_DIR - libmaploc.so exports the supported API and nothing else.

The rule (docs/api.md, "What libmaploc.so exports"): a dynamic symbol is allowed when it is
- a C API function declared MAPLOC_C_EXPORT in maploc/maploc_c.h (and every one of those is exported,
  except where the header declares it under an #if of what the build found), or
- a C++ symbol of a name declared at namespace scope of maploc, maploc::zip, maploc::pickle,
  maploc::torch, maploc::remap or maploc::remote in a public header (include/maploc): the function itself, or a member,
  vtable or typeinfo of the class, with no `detail` namespace anywhere in its name.
Everything else (internal classes, detail namespaces, std:: instantiations over maploc types) must be
local to the library. The allowed names come from the headers, not from third_party/libmaploc.map, so
the check is independent of the version script that implements it.
"""
import os
import re
import subprocess
import sys

NAMESPACES = ("maploc", "maploc::zip", "maploc::pickle", "maploc::torch", "maploc::remap", "maploc::remote")
PREFIXES = ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ", "construction vtable for ",
            "guard variable for ", "non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to ")


def strip_source(text):
    text = re.sub(r"(?<=[0-9a-fA-F])'(?=[0-9a-fA-F])", "", text)   # digit separators: 5'000'000
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', '""', text)
    return re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)


def public_names(include_dir):
    """{namespace: {identifiers at that namespace's scope}} over every public header."""
    names = {}
    for root, _, files in os.walk(include_dir):
        for f in files:
            if f.endswith(".h"):
                with open(os.path.join(root, f)) as fh:
                    scan(strip_source(fh.read()), names)
    return names


def scan(text, names):
    """Identifiers seen at namespace scope, outside every class body, function body and parenthesis."""
    stack = []          # "ns:<name>" for namespaces, "{" for any other brace
    parens = 0
    tokens = re.findall(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|::|\S", text)
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t == "namespace" and i + 2 < len(tokens) and tokens[i + 2] == "{":
            stack.append("ns:" + tokens[i + 1])
            i += 3
            continue
        if t in ("class", "struct", "union") and i + 2 < len(tokens) and tokens[i + 2] == ";":
            i += 3      # a forward declaration declares nothing supported (zip::DeferredLocate is internal)
            continue
        if t == "{":
            stack.append("{")
        elif t == "}":
            stack.pop()
        elif t in "([":
            parens += 1
        elif t in ")]":
            parens -= 1
        elif re.match(r"[A-Za-z_]", t) and parens == 0 and all(s.startswith("ns:") for s in stack):
            ns = "::".join(s[3:] for s in stack)
            names.setdefault(ns, set()).add(t.split("::")[0])
        i += 1


def c_api(include_dir):
    """(required, conditional): the MAPLOC_C_EXPORT functions of maploc_c.h; conditional ones are declared
    under an #if of what the build found, so may be absent (none is today)."""
    required, conditional, stack = set(), set(), []
    with open(os.path.join(include_dir, "maploc", "maploc_c.h")) as fh:
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), fh.read(), flags=re.S)
    for line in text.splitlines():
        directive = re.match(r"\s*#\s*(if|ifdef|ifndef|endif)\b(.*)", line)
        if directive:
            if directive.group(1) == "endif":
                stack.pop()
            else:   # the include guard and extern "C" do not make a declaration conditional
                stack.append(not re.search(r"MAPLOC_MAPLOC_C_H|__cplusplus", directive.group(2)))
            continue
        for name in re.findall(r"MAPLOC_C_EXPORT\s.*?\b(maploc_\w+)\s*\(", line):
            (conditional if any(stack) else required).add(name)
    return required, conditional


def split_top(s, sep):
    """s split at sep where no <...> or (...) is open."""
    parts, depth, cur, i = [], 0, "", 0
    while i < len(s):
        if s.startswith("operator", i):            # operator<, operator(), ... : not brackets
            m = re.match(r"operator\s*(\(\)|\[\]|[^\w\s(]+|\s\w[\w\s:*&<>]*?(?=\())", s[i:])
            if m:
                cur += m.group(0)
                i += len(m.group(0))
                continue
        c = s[i]
        if depth == 0 and s.startswith(sep, i):
            parts.append(cur)
            cur = ""
            i += len(sep)
            continue
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        cur += c
        i += 1
    return parts + [cur]


def qualified_name(symbol):
    """The entity a demangled symbol belongs to, as [component, ...], or None when it cannot tell."""
    for p in PREFIXES:
        if symbol.startswith(p):
            symbol = symbol[len(p):]
            break
    symbol = re.sub(r"\s*\[(abi:\w+|clone[^\]]*)\]", "", symbol)
    head = split_top(symbol, "(")[0]                 # drop the parameters
    head = split_top(head.strip(), " ")[-1]          # drop a template function's return type
    parts = split_top(head, "::")
    return [re.sub(r"<.*", "", p) for p in parts] if parts and all(parts) else None


def allowed(symbol, names, capi):
    if "::" not in symbol and " " not in symbol:
        return symbol in capi
    parts = qualified_name(symbol)
    if not parts or parts[0] != "maploc" or "detail" in parts or any("anonymous" in p for p in parts):
        return False
    for depth in (2, 1):                             # maploc::torch::X before maploc::X
        ns = "::".join(parts[:depth])
        if ns in NAMESPACES and len(parts) > depth and (depth == 2 or parts[1] not in ("zip", "pickle", "torch", "remap", "remote")):
            return parts[depth] in names.get(ns, set())
    return False


def main():
    library, include_dir = sys.argv[1:3]
    out = subprocess.run(["nm", "-D", "--defined-only", library], stdout=subprocess.PIPE, check=True,
                         text=True).stdout
    mangled = [line.split()[-1] for line in out.splitlines() if line.strip()]
    mangled = [m.split("@")[0] for m in mangled if m not in ("_init", "_fini")]
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled), stdout=subprocess.PIPE, check=True,
                               text=True).stdout.splitlines()
    names, (capi_required, capi_conditional) = public_names(include_dir), c_api(include_dir)
    capi = capi_required | capi_conditional
    bad = sorted(set(d for d in demangled if not allowed(d, names, capi)))
    missing = sorted(capi_required - set(mangled))
    cxx = sum(1 for d in demangled if "::" in d)
    print(f"{library}: {len(demangled)} exported ({len(set(mangled) & capi)} C API functions, {cxx} C++ symbols)")
    for d in bad:
        print("NOT SUPPORTED API, exported:", d)
    for m in missing:
        print("C API function not exported:", m)
    if bad or missing:
        print(f"FAILED: {len(bad)} symbol(s) outside the supported API, {len(missing)} C API function(s) missing")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
