"""Row 4: writes a marker file when it runs: a bad -o must stop tensorscope before this line runs."""
import sys

open(sys.argv[1], "w").write("ran")
