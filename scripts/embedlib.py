"""Shared by the embed scripts: generated sources are rewritten only when
their text changes, so an unchanged embed does not make SwiftPM rebuild."""


def write_if_changed(path, text):
    try:
        if open(path, encoding="utf-8").read() == text:
            return
    except FileNotFoundError:
        pass
    open(path, "w", encoding="utf-8").write(text)
