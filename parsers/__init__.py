"""Pure parsers for every IR irscope collects: text in, frozen data out, no I/O or UI."""
