"""The commands, the roof: the command line (cli.py) and what runs several
runs (demo, matrix, findings, gate). Nothing imports them."""
