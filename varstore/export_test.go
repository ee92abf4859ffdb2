package varstore

// CacheLen is the number of rows the cache holds (tests only).
func (s *Store) CacheLen() int { return s.cache.Len() }
