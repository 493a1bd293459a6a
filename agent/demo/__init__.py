"""`xihe demo`: the product's story on loopback fakes (scenes) in a throw-away environment."""
