import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_docs_checks_md_is_generated_from_the_catalogues():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_checks_doc.py"), "--check"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
