"""`python -m tensorscope` is `tensorscope`."""

from tensorscope.cli import main

if __name__ == "__main__":
    main()
