"""The one PNG writer (``uwbench.png``): a PNG of the figure's size at the given dpi, with no version string
or date in it, so the same figure saved twice is the same bytes; written whole (no temporary left)."""
from __future__ import annotations

import os
import struct
import zlib

from uwbench.png import save_png


def chunks(data: bytes) -> list:
    """(type, payload) of every chunk of a PNG, each CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    out, i = [], 8
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        (crc,) = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        assert crc == zlib.crc32(kind + body)
        out.append((kind.decode("ascii"), body))
        i += 12 + n
    return out


def figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1))
    fig.add_subplot().plot([0, 1, 2], [0, 1, 4])
    return fig


def test_a_figure_is_a_png_of_its_size_without_version_or_date_and_rebuilds_to_the_same_bytes(tmp_path):
    fig = figure()
    a = save_png(fig, str(tmp_path / "a.png"), dpi=50)
    b = save_png(figure(), str(tmp_path / "sub" / "b.png"), dpi=50)
    data = open(a, "rb").read()
    assert data == open(b, "rb").read()
    found = chunks(data)
    assert found[0][0] == "IHDR" and struct.unpack(">II", found[0][1][:8]) == (100, 50)  # 2 x 1 inches at 50 dpi
    assert found[-1][0] == "IEND"
    text = b"".join(body for kind, body in found if kind in ("tEXt", "iTXt", "zTXt"))
    assert b"matplotlib" not in text.lower() and b"Software" not in text
    assert not any(kind == "tIME" for kind, _ in found)
    default = chunks(open(save_png(fig, str(tmp_path / "c.png")), "rb").read())
    assert struct.unpack(">II", default[0][1][:8]) == (200, 100)  # the report's 100 dpi
    assert sorted(os.listdir(tmp_path)) == ["a.png", "c.png", "sub"]  # no temporary left
