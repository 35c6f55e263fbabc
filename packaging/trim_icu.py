"""Linux: replace the 32 MB ICU data library Qt links (``libicudata.so.<N>``) in a built bundle
with one that holds only the ICU data Qt needs for Lockwarden (about 3 MB).

Why: ``libQt6Core`` links ICU, and ICU's data library (every locale's names, currencies, units,
collations, dictionaries, legacy codepages) is a third of the Linux bundle. Lockwarden's text is
English, its files are UTF-8, it sorts with plain string comparison (no ``QCollator``), and Qt 6
formats numbers and dates from its own CLDR tables and does IDNA itself. What Qt still asks ICU
for is locale-aware case mapping (from data compiled into ``libicuuc``, not the data library);
the normalisation data (``*.nrm``), the root locale, the string pool, likely subtags and the
time-zone rules are kept anyway (small). A missing resource makes ICU fall back to the root
locale, never crash; ``--self-test`` checks ICU case mapping in the result.

Kept: top-level items that are not a locale's resource bundle and not a legacy codepage
converter (``*.cnv``) or character names (``unames.icu``); ``root.res``, ``pool.res`` and
``res_index.res`` of the trees kept in part; the time-zone rules (``zoneinfo64.res``,
``metaZones.res``, ``timezoneTypes.res``, ``windowsZones.res``). Removed: ``brkitr/``,
``coll/``, ``curr/``, ``lang/``, ``rbnf/``, ``region/``, ``translit/``, ``unit/``, ``zone/``
(``brkitr``, ``coll`` and ``translit`` whole, the others except their roots, so no kept item
misses a dependency), per-locale ``*.res``, ``*.cnv``, ``unames.icu``.

How: ``objcopy`` extracts the ``icudt<N>_dat`` blob (``.rodata``), ``icupkg`` (Debian
``icu-devtools``) removes items, and ``as`` + ``ld`` (binutils) make a new shared library
exporting the same symbol and soname. When a tool is missing the bundle is left as it is
(:func:`trim` returns the reason instead of sizes).

Usage: ``python packaging/trim_icu.py dist/lockwarden`` (``packaging/build.py`` calls
:func:`trim_bundle`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Top-level items that are locale-independent data although they end in ``.res``.
TREE_ROOTS = frozenset({"root.res", "pool.res", "res_index.res"})
DROP_TREES = frozenset({"brkitr", "coll", "curr", "lang", "rbnf", "region", "translit", "unit",
                        "zone"})
#: Trees dropped whole, roots included: their roots name binary rules and dictionaries
#: (``coll/ucadata.icu``, ``brkitr/*.brk``) that are dropped too.
DROP_WHOLE_TREES = frozenset({"brkitr", "coll", "translit"})
DROP_TOP = frozenset({"unames.icu"})
#: A locale's resource bundle: ``de.res``, ``zh_Hant_TW.res``, ``sr_Latn.res``, ``es_419.res``.
LOCALE_RES = re.compile(r"^[a-z]{2,3}(_[A-Za-z0-9]+)*\.res$")


def keep_item(item: str) -> bool:
    """Whether ICU data item ``item`` (as ``icupkg -l`` lists it, without the package prefix,
    e.g. ``"coll/de.res"``, ``"uprops.icu"``) stays in the trimmed data."""
    parts = item.split("/")
    if len(parts) > 1:
        if parts[0] in DROP_WHOLE_TREES:
            return False
        return parts[0] not in DROP_TREES or parts[-1] in TREE_ROOTS
    name = parts[0]
    if name in TREE_ROOTS:
        return True
    if name.endswith(".cnv") or name in DROP_TOP:
        return False
    return not LOCALE_RES.match(name)


def _tools() -> dict[str, str] | str:
    tools = {}
    for tool in ("objcopy", "objdump", "as", "ld", "icupkg"):
        path = shutil.which(tool)
        if path is None:
            return f"{tool} not found (Debian packages: binutils, icu-devtools)"
        tools[tool] = path
    return tools


def trim(lib: Path, out: Path) -> tuple[int, int] | str:
    """Write a trimmed copy of ICU data library ``lib`` to ``out``. Returns (bytes before,
    bytes after), or a reason (str) when it could not be done (``out`` is then not written).
    """
    tools = _tools()
    if isinstance(tools, str):
        return tools
    dump = subprocess.run([tools["objdump"], "-T", str(lib)], capture_output=True, text=True)
    m = re.search(r"\s(icudt(\d+)_dat)\s*$", dump.stdout, re.MULTILINE)
    if not m:
        return f"{lib.name}: no icudt<N>_dat symbol"
    symbol, major = m.group(1), m.group(2)
    with tempfile.TemporaryDirectory(prefix="lockwarden-icu-") as d:
        work = Path(d)
        dat = work / f"icudt{major}l.dat"
        # the output keeps the input's file name: icupkg prefixes every item with the package
        # name taken from it ("icudt73l/root.res"), and ICU looks items up by that prefix
        (work / "out").mkdir()
        small = work / "out" / dat.name
        subprocess.run([tools["objcopy"], "-O", "binary", "--only-section=.rodata", str(lib),
                        str(dat)], check=True)
        listing = subprocess.run([tools["icupkg"], "-l", str(dat)], capture_output=True,
                                 text=True, check=True).stdout.split()
        drop = [item for item in listing if not keep_item(item)]
        if not drop:
            return "nothing to remove"
        (work / "drop.txt").write_text("\n".join(drop) + "\n", encoding="ascii")
        subprocess.run([tools["icupkg"], "-r", "drop.txt", dat.name, f"out/{dat.name}"],
                       cwd=work, check=True, capture_output=True)
        asm = work / "icudata.S"
        asm.write_text(
            "\t.section .rodata\n"
            f"\t.globl {symbol}\n"
            f"\t.type {symbol}, @object\n"
            "\t.balign 16\n"
            f"{symbol}:\n"
            f'\t.incbin "{small}"\n'
            f"\t.size {symbol}, .-{symbol}\n"
            '\t.section .note.GNU-stack,"",@progbits\n',
            encoding="ascii",
        )
        obj = work / "icudata.o"
        tmp_out = work / lib.name
        subprocess.run([tools["as"], "-o", str(obj), str(asm)], check=True)
        subprocess.run([tools["ld"], "-shared", "-s", "-soname", lib.name, "-o", str(tmp_out),
                        str(obj)], check=True)
        shutil.copyfile(tmp_out, out)
    return lib.stat().st_size, out.stat().st_size


def trim_bundle(bundle: Path) -> str:
    """Trim every ``libicudata.so.*`` in ``bundle`` in place; return a one-line summary."""
    libs = [p for p in bundle.rglob("libicudata.so.*") if p.is_file() and not p.is_symlink()]
    if not libs:
        return "trim_icu: no libicudata in the bundle"
    notes = []
    for lib in libs:
        out = lib.with_name(lib.name + ".trimmed")
        result = trim(lib, out)
        if isinstance(result, str):
            notes.append(f"{lib.name} kept ({result})")
            continue
        out.replace(lib)
        before, after = result
        notes.append(f"{lib.name} {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return "trim_icu: " + "; ".join(notes)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python packaging/trim_icu.py BUNDLE_DIR")
    print(trim_bundle(Path(sys.argv[1])))
