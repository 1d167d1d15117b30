"""The kit's tools that run on the box: the verified downloader (fetch), the release manager
(release), checkpoint revisions (revisions) and the validation gate (gate).

Shipped by tasks/box_tools.py to <kit_dir>/lib/boxtools and started through the launchers in
<kit_dir>/bin (laguna_fetch.py, laguna_release.py, laguna_gate.py). Modules import each other
relatively and use the standard library only, except fetch (huggingface_hub) and gate (httpx),
which run in the kit's venv on the box.
"""
