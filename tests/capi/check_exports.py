#!/usr/bin/env python3
"""check_exports.py LIBRARY INCLUDE_DIR API_DOC - libmaploc.so exports the supported API and nothing else.

The rule (docs/api.md, "What libmaploc.so exports"): a dynamic symbol is allowed when it is
- a C API function declared MAPLOC_C_EXPORT in maploc/maploc_c.h (and every one of those is exported,
  except where the header declares it under an #if of what the build found), or
- a C++ symbol of a name declared at namespace scope of maploc, maploc::zip, maploc::pickle,
  maploc::torch, maploc::remap or maploc::remote in a public header (include/maploc): the function itself, or a member,
  vtable or typeinfo of the class, with no `detail` namespace anywhere in its name.
Everything else (internal classes, detail namespaces, std:: instantiations over maploc types) must be
local to the library. The allowed names come from the headers, not from third_party/libmaploc.map, so
the check is independent of the version script that implements it.

The tiers (docs/api.md, "Headers: what is supported"): API_DOC's table "Reference: every public header"
gives each installed header its tier, stable (the promised contract) or tools (installed and exported
for tools, no stability promise). Every header under INCLUDE_DIR has exactly one tier there and every
header the table names exists (a new header cannot be installed without deciding what it promises);
the C API is stable; the exported C++ symbols are counted per tier, by the header that declares them.
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


TIERS = ("stable", "tools")


def public_headers(include_dir):
    """Every public header, as docs/api.md names it: maploc/torch/checkpoint.h."""
    return sorted(os.path.relpath(os.path.join(root, f), include_dir)
                  for root, _, files in os.walk(include_dir) for f in files if f.endswith(".h"))


def public_names(include_dir):
    """{namespace: {identifier at that namespace's scope: {headers declaring it}}} over every public header."""
    names = {}
    for header in public_headers(include_dir):
        with open(os.path.join(include_dir, header)) as fh:
            scan(strip_source(fh.read()), names, header)
    return names


def api_tiers(api_doc):
    """{header: tier} from the tier column of API_DOC's reference table, and the problems of the table."""
    tiers, problems = {}, []
    with open(api_doc) as fh:
        for line in fh:
            m = re.match(r"\|\s*`(maploc/[\w/]+\.h)`\s*\|\s*(\w+)\s*\|", line)
            if not m:
                continue
            header, tier = m.groups()
            if tier not in TIERS:
                problems.append(f"{api_doc}: {header} has tier '{tier}', not one of {', '.join(TIERS)}")
            elif header in tiers:
                problems.append(f"{api_doc}: {header} is listed twice")
            tiers[header] = tier
    return tiers, problems


def scan(text, names, header):
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
            names.setdefault(ns, {}).setdefault(t.split("::")[0], set()).add(header)
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


def declared_in(symbol, names, capi):
    """The public headers declaring what an exported symbol belongs to (maploc_c.h for the C API); empty
    when it is not supported API."""
    if "::" not in symbol and " " not in symbol:
        return {"maploc/maploc_c.h"} if symbol in capi else set()
    parts = qualified_name(symbol)
    if not parts or parts[0] != "maploc" or "detail" in parts or any("anonymous" in p for p in parts):
        return set()
    for depth in (2, 1):                             # maploc::torch::X before maploc::X
        ns = "::".join(parts[:depth])
        if ns in NAMESPACES and len(parts) > depth and (depth == 2 or parts[1] not in ("zip", "pickle", "torch", "remap", "remote")):
            return names.get(ns, {}).get(parts[depth], set())
    return set()


def main():
    library, include_dir, api_doc = sys.argv[1:4]
    out = subprocess.run(["nm", "-D", "--defined-only", library], stdout=subprocess.PIPE, check=True,
                         text=True).stdout
    mangled = [line.split()[-1] for line in out.splitlines() if line.strip()]
    mangled = [m.split("@")[0] for m in mangled if m not in ("_init", "_fini")]
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled), stdout=subprocess.PIPE, check=True,
                               text=True).stdout.splitlines()
    names, (capi_required, capi_conditional) = public_names(include_dir), c_api(include_dir)
    capi = capi_required | capi_conditional
    tiers, tier_problems = api_tiers(api_doc)
    headers = public_headers(include_dir)
    tier_problems += [f"{h} is installed but has no tier in {api_doc}" for h in headers if h not in tiers]
    tier_problems += [f"{api_doc} gives a tier to {h}, which is not installed" for h in tiers if h not in headers]
    if tiers.get("maploc/maploc_c.h", "stable") != "stable":
        tier_problems.append(f"{api_doc}: the C API (maploc/maploc_c.h) is not stable")
    bad, per_tier = set(), {t: 0 for t in TIERS}
    for d in demangled:
        where = declared_in(d, names, capi)
        if not where:
            bad.add(d)
        elif "::" in d:   # a name declared in a stable header and a tools one is stable
            per_tier["stable" if any(tiers.get(h) == "stable" for h in where) else "tools"] += 1
    bad = sorted(bad)
    missing = sorted(capi_required - set(mangled))
    print(f"{library}: {len(demangled)} exported ({len(set(mangled) & capi)} C API functions, "
          f"{per_tier['stable']} C++ symbols of the stable API, {per_tier['tools']} of the tools tier; "
          f"{sum(t == 'stable' for t in tiers.values())} stable headers, {sum(t == 'tools' for t in tiers.values())} "
          "for tools: docs/api.md)")
    for d in bad:
        print("NOT SUPPORTED API, exported:", d)
    for m in missing:
        print("C API function not exported:", m)
    for p in tier_problems:
        print("TIER:", p)
    if bad or missing or tier_problems:
        print(f"FAILED: {len(bad)} symbol(s) outside the supported API, {len(missing)} C API function(s) missing, "
              f"{len(tier_problems)} problem(s) with the tiers of docs/api.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
