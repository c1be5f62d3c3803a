"""Command line: ``slipstream demo``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slipstream", description="Fast data loading for PyTorch vision training.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="decode a folder of JPEGs with random crops and print images/s")
    demo.add_argument("--data", help="folder of JPEG images (default: generate synthetic ones)")
    demo.add_argument("--epochs", type=int, default=3, help="passes over the images (default: 3)")
    demo.add_argument("--count", type=int, default=256, help="number of images to generate (default: 256)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from slipstream import demo as demo_module

        return demo_module.main(args.data, args.epochs, args.count)
    return 2


if __name__ == "__main__":
    sys.exit(main())
