"""What the model can call, and the services behind it, one folder (or module) per feature.

There is no catalogue here: each feature's `install` returns its tools, and `xihe.agent.app` merges
them (`xihe tools` prints the result for a config directory).
"""
