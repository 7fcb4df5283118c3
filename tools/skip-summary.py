#!/usr/bin/env python3
"""skip-summary.py - the tests that did not run, and why, from ctest's JUnit files.

    python3 tools/skip-summary.py BUILD/ctest-junit.xml [MORE.xml ...]

tools/test.sh runs ctest three times (plain, ASan+UBSan, TSan), each writing --output-junit; a
skipped test is listed by ctest in the middle of an hour of log. This prints, last, per file: how
many tests ran, passed, failed and were skipped, and each skipped test with the reason its output
gives (the line that says "skip", else its last line). A missing or unreadable file is an error:
the run that should have written it did not finish.
"""
import sys
import xml.etree.ElementTree as ET


def reason(case):
    out = case.findtext("system-out") or ""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    for l in reversed(lines):
        if "skip" in l.lower():
            return l
    skipped = case.find("skipped")
    message = skipped.get("message", "") if skipped is not None else ""
    return lines[-1] if lines else (message or "no output")


def summarise(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print("skip-summary: cannot read %s: %s" % (path, e))
        return False
    cases = root.iter("testcase")
    ran = passed = failed = 0
    skipped = []
    for case in cases:
        status = case.get("status", "run")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped.append((case.get("name", "?"), reason(case)))
            continue
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed += 1
        else:
            passed += 1
    print("skip-summary: %s: %d ran (%d passed, %d failed), %d skipped" % (path, ran, passed, failed, len(skipped)))
    for name, why in skipped:
        print("  skipped: %s\n    why: %s" % (name, why[:300]))
    return True


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    ok = all([summarise(p) for p in sys.argv[1:]])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
