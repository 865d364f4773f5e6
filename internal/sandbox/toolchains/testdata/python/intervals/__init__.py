"""Interval arithmetic on half-open integer ranges [start, end)."""


def merge(intervals):
    """Returns the union of intervals as sorted, disjoint ranges."""
    out = []
    for start, end in sorted(intervals):
        if start >= end:
            raise ValueError(f"empty interval [{start}, {end})")
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def total(intervals):
    """Returns how many integers the union of intervals covers."""
    return sum(end - start for start, end in merge(intervals))
