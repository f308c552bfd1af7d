"""File search behind the glob and grep tools: which files to look at, and what they hold.

A search has two steps with one deadline. Listing (`listing`) walks a directory of the
workspace without following symlinks, honours ``.gitignore`` and skips generated
directories; matching (`matching`) searches the listed files line by line. Each step
has two engines: ripgrep where it is installed (`ripgrep`), and plain Python, which
gives the same results and keeps the same limits when it is not.
"""
