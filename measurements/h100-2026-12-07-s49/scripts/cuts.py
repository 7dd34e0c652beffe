"""Summarizes the part boundaries copies forced in a `texstream run` log at trace level
(`texstream_vk::stream_cuts`; lookups that load pages: `texstream::runtime::stream_exec`): per engine session (from each `NAME: request 1/N` line), how
many, by model, by how many loads before the cut the needed load was issued, and the pages
that force most. Usage: python3 cuts.py LOG."""
import collections
import re
import sys

CUT = re.compile(r"forced cut before step value (\d+): model (\d+) page (\d+) is load (\d+) \((\d+) loads ago\); load (\d+) waits")
LOOKUP = re.compile(r"lookup of model (\d+) loads page (\d+) into the lookup slot")
START = re.compile(r"^([\w -]+): request 1/\d+")


def main():
    sessions = []
    cur = None
    for line in open(sys.argv[1], errors="replace"):
        m0 = START.match(line)
        if m0:
            cur = {"name": m0[1], "cuts": [], "lookups": 0}
            sessions.append(cur)
            continue
        if cur is not None and LOOKUP.search(line):
            cur["lookups"] += 1
        m = CUT.search(line)
        if m and cur is not None:
            cur["cuts"].append(tuple(int(x) for x in m.groups()))
    for s in sessions:
        cuts = s["cuts"]
        print(f"{s['name']}: {len(cuts)} forced cuts; {s['lookups']} pages loaded by lookups")
        if not cuts:
            continue
        by_model = collections.Counter(c[1] for c in cuts)
        print("  by model of the needed page: " + ", ".join(f"{k}: {v}" for k, v in sorted(by_model.items())))
        ago = collections.Counter(min(c[4], 64) for c in cuts)
        print("  needed load issued N loads before the cut (64 = 64 or more): " + ", ".join(f"{k}: {v}" for k, v in sorted(ago.items())))
        gap = collections.Counter(min(c[3] - c[5], 64) for c in cuts)
        print("  needed load minus the first load waiting for the part: " + ", ".join(f"{k}: {v}" for k, v in sorted(gap.items())))
        pages = collections.Counter((c[1], c[2]) for c in cuts)
        print("  pages forcing most: " + ", ".join(f"m{m} p{p}: {n}" for (m, p), n in pages.most_common(12)))


if __name__ == "__main__":
    main()
