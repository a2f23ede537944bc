#!/usr/bin/env python3
"""tests/compat/llama_suite_diff.py: compares two runs of llama.cpp's server
suite (JUnit XML files written by llama_server_suite.sh with
LLAMA_SUITE_JUNIT set), the first against llama-server, the second against
hearth, and prints per file the pass/fail/skip counts of each, then every
test whose outcome differs. Exit status 1 when a test passes on the first
server and not on the second: issue 20's measure.

    tests/compat/llama_suite_diff.py LLAMA.xml [LLAMA2.xml ...] -- HEARTH.xml [...]

Several files a side are merged (the suite is run file by file, each under
its own timeout); a test missing from one side (its run timed out before
reaching it) counts as "absent"."""
import sys
import xml.etree.ElementTree as ET


def outcomes(paths):
    res = {}
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name")
            if case.find("skipped") is not None:
                res[name] = "skip"
            elif case.find("failure") is not None or case.find("error") is not None:
                res[name] = "fail"
            else:
                res[name] = "pass"
    return res


def counts(res, prefix):
    c = {"pass": 0, "fail": 0, "skip": 0}
    for name, out in res.items():
        if name.startswith(prefix + "::"):
            c[out] += 1
    return c


def main(argv):
    if "--" not in argv:
        print(__doc__)
        return 2
    cut = argv.index("--")
    a, b = outcomes(argv[:cut]), outcomes(argv[cut + 1:])
    files = sorted({n.split("::")[0] for n in list(a) + list(b)})
    print(f"{'file':36} {'llama-server p/f/s':>20} {'hearth p/f/s':>16}")
    tot_a = {"pass": 0, "fail": 0, "skip": 0}
    tot_b = dict(tot_a)
    for f in files:
        ca, cb = counts(a, f), counts(b, f)
        for k in tot_a:
            tot_a[k] += ca[k]
            tot_b[k] += cb[k]
        print(f"{f:36} {ca['pass']:>8}/{ca['fail']}/{ca['skip']:<8} {cb['pass']:>6}/{cb['fail']}/{cb['skip']}")
    print(f"{'total':36} {tot_a['pass']:>8}/{tot_a['fail']}/{tot_a['skip']:<8} {tot_b['pass']:>6}/{tot_b['fail']}/{tot_b['skip']}")
    worse = 0
    for name in sorted(set(a) | set(b)):
        oa, ob = a.get(name, "absent"), b.get(name, "absent")
        if oa != ob:
            print(f"differs: {name}: llama-server {oa}, hearth {ob}")
            worse += oa == "pass"
    print(f"{worse} passing on llama-server and not on hearth")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
