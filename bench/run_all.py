"""`make bench` / `make bench-quick`: run every benchmark; quick mode uses small sizes (~2 minutes)."""

from __future__ import annotations

import argparse

from bench import embed_throughput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Small sizes, about 2 minutes in all")
    args = parser.parse_args()
    embed_throughput.main(["--products", "500" if args.quick else "3000"])


if __name__ == "__main__":
    main()
