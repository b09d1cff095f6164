"""A contact sheet: tiles in a grid, each with caption lines under it, drawn with Pillow."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

PAD = 6
LINE_HEIGHT = 14
CAPTION_LINES = 2
BACKGROUND = (32, 32, 32)
TEXT = (235, 235, 235)


@dataclasses.dataclass(frozen=True)
class SheetLayout:
    """Where tile `i` goes: a grid of `cols` columns of cells, each `cell_w` x `cell_h` plus a caption strip."""

    count: int
    cols: int
    cell_w: int
    cell_h: int
    caption_h: int = CAPTION_LINES * LINE_HEIGHT + 2
    pad: int = PAD

    @property
    def rows(self) -> int:
        return -(-self.count // self.cols)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the sheet in pixels."""
        return (self.pad + self.cols * (self.cell_w + self.pad),
                self.pad + self.rows * (self.cell_h + self.caption_h + self.pad))

    def origin(self, index: int, tile_w: int | None = None) -> tuple[int, int]:
        """Top-left pixel of tile `index` (a narrower tile is centred in its cell)."""
        x = self.pad + (index % self.cols) * (self.cell_w + self.pad)
        y = self.pad + (index // self.cols) * (self.cell_h + self.caption_h + self.pad)
        return x + (self.cell_w - (tile_w or self.cell_w)) // 2, y


def sheet_layout(tile_sizes: list[tuple[int, int]], cols: int | None = None) -> SheetLayout:
    """The layout for tiles of these (height, width): near-square by default, cells as large as the largest tile."""
    count = len(tile_sizes)
    cols = cols or max(1, int(np.ceil(np.sqrt(count))))
    return SheetLayout(count, min(cols, count), max(w for _, w in tile_sizes), max(h for h, _ in tile_sizes))


def write_sheet(tiles: list[np.ndarray], captions: list[list[str]], path: Path,
                cols: int | None = None) -> SheetLayout:
    """Write HxWx3 (or HxW) uint8 tiles with their caption lines to `path`; returns the layout used."""
    from PIL import Image, ImageDraw, ImageFont

    layout = sheet_layout([t.shape[:2] for t in tiles], cols)
    sheet = Image.new("RGB", layout.size, BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=11)
    for index, (tile, lines) in enumerate(zip(tiles, captions, strict=True)):
        image = Image.fromarray(tile if tile.ndim == 2 else np.ascontiguousarray(tile[..., :3]))
        x, y = layout.origin(index, tile.shape[1])
        sheet.paste(image.convert("RGB"), (x, y))
        cell_x = layout.origin(index)[0]
        for number, line in enumerate(lines[:CAPTION_LINES]):
            draw.text((cell_x, y + layout.cell_h + 2 + number * LINE_HEIGHT), _fit(draw, font, line, layout.cell_w),
                      fill=TEXT, font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)
    return layout


def _fit(draw, font, text: str, width: int) -> str:
    """`text`, shortened with an ellipsis until it fits in `width` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"
