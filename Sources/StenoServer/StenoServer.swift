// StenoServer
