"""The README's main job (until the distributed solver lands): an explicit
2-D heat solver built lazily and run on the NumPy reference target."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from heat_serial import main  # noqa: E402

sys.exit(main())
