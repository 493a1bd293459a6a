"""WeCom (企业微信) gateway: callback crypto, app and AI-bot callbacks, app message client, routes."""
