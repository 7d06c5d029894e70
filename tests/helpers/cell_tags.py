"""How the lessons mark cells for the tests: nbval's tags in the cell's metadata
(``nbval-skip``: a real job the tests do not start; ``nbval-check-output``: its saved output
is compared), never comments a student would read."""


def tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


def skipped(cell) -> bool:
    """A code cell the tests leave out (a real torchrun job)."""
    return cell.get("cell_type") == "code" and "nbval-skip" in tags(cell)


def checked(cell) -> bool:
    """A code cell whose saved output nbval compares."""
    return cell.get("cell_type") == "code" and "nbval-check-output" in tags(cell)
