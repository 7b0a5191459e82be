"""xdist scheduling: all tests of one model go to one worker, which owns its server."""
