"""GPT-2's named model shapes for the Python scripts, read from the C++ table llmc/gpt2_shapes.def."""
import pathlib
import re

SHAPES_FILE = pathlib.Path(__file__).resolve().parent.parent / "llmc" / "gpt2_shapes.def"


def named_shapes():
    """{name: (layers, heads, channels)}, in the table's order."""
    rows = re.findall(r"^GPT2_SHAPE\((\w+), (\d+), (\d+), (\d+)\)$", SHAPES_FILE.read_text(), re.M)
    if not rows:
        raise RuntimeError(f"{SHAPES_FILE}: no GPT2_SHAPE(name, layers, heads, channels) rows")
    return {name: (int(layers), int(heads), int(channels)) for name, layers, heads, channels in rows}
